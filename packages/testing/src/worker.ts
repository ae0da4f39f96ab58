/**
 * Child-process side of the multi-process race and crash helpers (see `processes.ts`).
 * Run as `node [--import tsx] worker.js` with the scenario in the environment; prints one JSON
 * line to stdout. Not part of the public API.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { createIdempotency, IdempotencyError, type IdempotencyStore } from '@idempotent-tools/core';
import type { WorkerScenario } from './processes.js';

interface StoreModule {
  createStore(): Promise<{ store: IdempotencyStore; close?: () => Promise<void> }>;
}

const scenario = JSON.parse(process.env.IDEMPOTENT_TOOLS_WORKER ?? '{}') as WorkerScenario;
const storeModule = (await import(scenario.storeModule)) as StoreModule;
const { store, close } = await storeModule.createStore();

const effects = () =>
  existsSync(scenario.effectsFile)
    ? readFileSync(scenario.effectsFile, 'utf8').split('\n').filter(Boolean)
    : [];

/** The side effect: one line appended to a shared file (O_APPEND: atomic across processes). */
function sideEffect(tag: string): { effect: string } {
  const effect = `${tag}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  appendFileSync(scenario.effectsFile, `${effect}\n`);
  return { effect };
}

const die = () => process.kill(process.pid, 'SIGKILL');

const real = store;
const guarded: IdempotencyStore =
  scenario.kind === 'crash-after-persist'
    ? ({
        ...Object.fromEntries(
          (
            [
              'claim',
              'release',
              'renew',
              'takeover',
              'get',
              'waitForChange',
              'purgeExpired',
              'close',
            ] as const
          )
            .filter((m) => typeof real[m] === 'function')
            .map((m) => [m, (real[m] as (...a: unknown[]) => unknown).bind(real)]),
        ),
        specificationVersion: real.specificationVersion,
        name: real.name,
        capabilities: real.capabilities,
        complete: async (input) => {
          const ok = await real.complete(input);
          die(); // persisted, the reply never leaves
          return ok;
        },
      } as IdempotencyStore)
    : real;

const idempotency = createIdempotency({ store: guarded, lease: scenario.leaseMs ?? 30_000 });
const call = { toolName: scenario.toolName, turnId: scenario.turnId, args: scenario.args };

async function once(): Promise<unknown> {
  try {
    const result = await idempotency.run(
      call,
      async () => {
        const value = sideEffect(scenario.kind);
        if (scenario.kind === 'crash-after-effect') die();
        await new Promise((r) => setTimeout(r, scenario.effectMs ?? 20));
        return value;
      },
      scenario.reconcile
        ? {
            reconcile: async () => {
              const found = effects();
              return found.length > 0
                ? { found: true, value: { effect: found[0] } }
                : { found: false };
            },
          }
        : {},
    );
    return { ok: true, value: result.value, replayed: result.replayed, outcome: result.outcome };
  } catch (error) {
    if (IdempotencyError.isInstance(error))
      return { ok: false, code: error.code, message: error.message };
    return { ok: false, code: 'error', message: String(error) };
  }
}

// Every worker starts the race at the same wall-clock moment.
if (scenario.startAt !== undefined) {
  await new Promise((r) => setTimeout(r, Math.max(0, scenario.startAt! - Date.now())));
}
const results = await Promise.all(Array.from({ length: scenario.calls ?? 1 }, once));
process.stdout.write(`${JSON.stringify({ pid: process.pid, results })}\n`);
await close?.();
process.exit(0);
