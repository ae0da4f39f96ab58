/**
 * `node --import ./core-hook-register.ts worker.ts` with CHAOS_CORE_DIR set: the worker loads the
 * mutated copy of core (mutations.ts) wherever `@idempotent-tools/core` is imported.
 */
import { register } from 'node:module';

const coreDir = process.env.CHAOS_CORE_DIR;
if (coreDir !== undefined && coreDir !== '') {
  register('./core-hook.ts', import.meta.url, { data: { coreDir } });
}
