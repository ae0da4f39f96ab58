/**
 * idempotentTask on a persistent checkpointer (PostgresSaver on the local PostgreSQL) and the
 * SQLite store: an interrupt resumed, and a process killed inside the approved charge, resumed by
 * another process.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIdempotency, type IdempotencyEvent } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild, serviceAvailable } from '@idempotent-tools/testing';
import { Command } from '@langchain/langgraph';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkout, type Order } from './test-utils/checkout.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const child = fileURLToPath(new URL('./test-utils/langgraph-crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'langgraph-crash-'));
const schema = `lg_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
const LEASE_MS = 1_000;
const order: Order = { id: 'o-1', amount: 40 };

const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
admin.on('error', () => {});
const postgresUp = await serviceAvailable({
  name: 'PostgreSQL',
  url: DATABASE_URL,
  probe: () => admin.query('SELECT 1'),
});
const savers: PostgresSaver[] = [];
const saver = () => {
  const s = PostgresSaver.fromConnString(DATABASE_URL, { schema });
  savers.push(s);
  return s;
};
beforeAll(async () => {
  if (!postgresUp) return;
  await admin.query(`CREATE SCHEMA ${schema}`);
  await saver().setup();
});
afterAll(async () => {
  for (const s of savers) await s.end();
  if (postgresUp) await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

const scenario = () => ({
  sqliteFile: join(dir, `${randomUUID()}.db`),
  effectsFile: join(dir, `${randomUUID()}.log`),
  threadId: `thread-${randomUUID()}`,
});

/** Run the child until it kills itself inside the charge. */
async function crash(mode: 'after-effect' | 'after-persist') {
  const s = scenario();
  const { signal, stderr } = await runChild(child, {
    cwd: packageDir,
    env: {
      DATABASE_URL,
      PG_SCHEMA: schema,
      SQLITE_FILE: s.sqliteFile,
      EFFECTS_FILE: s.effectsFile,
      THREAD_ID: s.threadId,
      CRASH: mode,
      LEASE_MS: String(LEASE_MS),
    },
  });
  expect({ signal, stderr }).toEqual({ signal: 'SIGKILL', stderr: '' });
  expect(countEffects(s.effectsFile)).toBe(1);
  return s;
}

/** This process takes the thread over: same Postgres checkpoints, same SQLite file. */
function resume(
  s: ReturnType<typeof scenario>,
  policy: NonNullable<Parameters<typeof checkout>[0]['options']['policy']> = {},
) {
  const events: IdempotencyEvent[] = [];
  const store = openSqliteStore(s.sqliteFile);
  const idempotency = createIdempotency({
    store,
    lease: LEASE_MS,
    onEvent: (e) => void events.push(e),
  });
  const workflow = checkout({
    checkpointer: saver(),
    effectsFile: s.effectsFile,
    options: { idempotency, policy },
  });
  const config = { configurable: { thread_id: s.threadId } };
  return { workflow, config, events, close: () => store.close() };
}

describe.skipIf(!postgresUp)('PostgresSaver + SQLite store', () => {
  test('an approval interrupt resumed from Postgres by a new workflow object: one charge', async () => {
    const s = scenario();
    const first = resume(s);
    const paused = await first.workflow.invoke(order, first.config);
    expect(paused).toMatchObject({ __interrupt__: [{ value: { approve: order } }] });
    first.close();
    const second = resume(s);
    const done = await second.workflow.invoke(new Command({ resume: true }), second.config);
    expect(done).toEqual({ status: 'charged', receipt: { chargeId: 'ch_1', amount: 40 } });
    second.close();
    expect(countEffects(s.effectsFile)).toBe(1);
  });

  test('killed after the charge was stored, before the checkpoint: the resumed run replays it', async () => {
    const s = await crash('after-persist');
    const { workflow, config, events, close } = resume(s);
    // The app re-sends the approval (its request never got an answer).
    const done = await workflow.invoke(new Command({ resume: true }), config);
    close();
    expect(done).toEqual({ status: 'charged', receipt: { chargeId: 'ch_1', amount: 40 } });
    // LangGraph ran the charge task again (its result was not in the checkpoint): replayed.
    expect(events.map((e) => e.outcome)).toEqual(['replayed']);
    expect(countEffects(s.effectsFile)).toBe(1);
  });

  test('killed after the charge was stored: a whole-graph retry with the input replays it too', async () => {
    const s = await crash('after-persist');
    const { workflow, config, close } = resume(s);
    await workflow.invoke(order, config); // a new run of the same order: the approval again
    const done = await workflow.invoke(new Command({ resume: true }), config);
    close();
    expect(done).toEqual({ status: 'charged', receipt: { chargeId: 'ch_1', amount: 40 } });
    expect(countEffects(s.effectsFile)).toBe(1);
  });

  test('killed after the charge, before it was stored: outcome_unknown, no second charge', async () => {
    const s = await crash('after-effect');
    const { workflow, config, close } = resume(s);
    const error = await workflow.invoke(new Command({ resume: true }), config).catch((e) => e);
    close();
    expect(error).toMatchObject({ code: 'outcome_unknown' });
    expect(countEffects(s.effectsFile)).toBe(1);
  });

  test('killed after the charge, before it was stored, with reconcile: the charge is adopted', async () => {
    const s = await crash('after-effect');
    const { workflow, config, events, close } = resume(s, {
      reconcile: async ({ args: [o] }) =>
        countEffects(s.effectsFile) > 0
          ? { found: true, value: { chargeId: 'ch_1', amount: o.amount } }
          : { found: false },
    });
    const done = await workflow.invoke(new Command({ resume: true }), config);
    close();
    expect(done).toEqual({ status: 'charged', receipt: { chargeId: 'ch_1', amount: 40 } });
    expect(events.map((e) => e.outcome)).toEqual(['reconciled']);
    expect(countEffects(s.effectsFile)).toBe(1);
  });
});
