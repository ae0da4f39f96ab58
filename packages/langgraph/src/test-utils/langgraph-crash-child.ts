/**
 * A process that runs the checkout workflow on PostgresSaver + a SQLite idempotency store and
 * SIGKILLs itself inside the approved charge: after the side effect (`CRASH=after-effect`: its
 * outcome is never stored) or right after the outcome was stored (`CRASH=after-persist`: the
 * task's result never reaches the checkpoint).
 * Env: DATABASE_URL, PG_SCHEMA, SQLITE_FILE, EFFECTS_FILE, THREAD_ID, CRASH, LEASE_MS.
 */
import { createIdempotency } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { Command } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { checkout } from './checkout.js';

const env = process.env;
const die = () => process.kill(process.pid, 'SIGKILL');
const idempotency = createIdempotency({
  store: openSqliteStore(env.SQLITE_FILE as string),
  lease: Number(env.LEASE_MS),
  onEvent: (event) => {
    if (env.CRASH === 'after-persist' && event.outcome === 'executed') die();
  },
});
const checkpointer = PostgresSaver.fromConnString(env.DATABASE_URL as string, {
  schema: env.PG_SCHEMA as string,
});
const workflow = checkout({
  checkpointer,
  effectsFile: env.EFFECTS_FILE as string,
  options: { idempotency },
  afterEffect: () => {
    if (env.CRASH === 'after-effect') die();
  },
});
// `sync`: every checkpoint is written before the run goes on, so what the kill loses is exactly
// the charge task's own result.
const config = {
  configurable: { thread_id: env.THREAD_ID as string },
  durability: 'sync' as const,
};
await workflow.invoke({ id: 'o-1', amount: 40 }, config);
await workflow.invoke(new Command({ resume: true }), config);
console.error('the child was meant to die before finishing');
process.exit(3);
