/**
 * A process that runs the crash agent on a SQLite store and SIGKILLs itself: after the side
 * effect (`CRASH=after-effect`: the outcome is never stored) or right after the outcome was
 * stored (`CRASH=after-persist`: the reply never reaches the model).
 * Env: SQLITE_FILE, EFFECTS_FILE, THREAD_ID, CRASH, LEASE_MS.
 */
import { createIdempotency } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { crashAgent } from './crash-agent.js';

const env = process.env;
const die = () => process.kill(process.pid, 'SIGKILL');
const idempotency = createIdempotency({
  store: openSqliteStore(env.SQLITE_FILE as string),
  lease: Number(env.LEASE_MS),
  onEvent: (event) => {
    if (env.CRASH === 'after-persist' && event.outcome === 'executed') die();
  },
});
const run = crashAgent({
  effectsFile: env.EFFECTS_FILE as string,
  options: { idempotency },
  afterEffect: () => {
    if (env.CRASH === 'after-effect') die();
  },
});
await run(env.THREAD_ID as string);
console.error('the child was meant to die before finishing');
process.exit(3);
