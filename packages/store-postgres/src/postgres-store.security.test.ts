import { createIdempotency, StoreUnavailableError } from '@idempotent-tools/core';
import { runStoreFuzz } from '@idempotent-tools/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPostgresStore, type PostgresStore } from './postgres-store.js';
import { postgresUp, testPool, uniqueName } from './test-utils/pg.js';

// Issue #10: hostile strings against a real PostgreSQL (quotes, dollar quoting, backslashes,
// NUL, lone surrogates, CRLF), and fail-open.

const pool = testPool({ label: 'security' });
const up = await postgresUp(pool);
const schema = uniqueName('idt_security');
let tables = 0;

beforeAll(async () => {
  if (up) await pool.query(`CREATE SCHEMA ${schema}`);
});
afterAll(async () => {
  if (up) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

runStoreFuzz({
  name: 'postgres store',
  describe: describe.skipIf(!up),
  test,
  expect,
  runs: Number(process.env.FUZZ_RUNS) || 200,
  createStore: async () => {
    const store = createPostgresStore(pool, { schema, table: `fuzz${tables++}` });
    await store.ensureSchema();
    return store;
  },
  destroyStore: async (store: PostgresStore) => {
    await store.close();
    await pool.query(`DROP TABLE IF EXISTS ${store.names.qualified}`);
  },
});

describe('postgres store: store unavailable', () => {
  test('fail-closed by default; fail-open runs the tool unguarded and says so', async () => {
    // Nothing listens on port 1: every connection is refused.
    const down = new pg.Pool({
      connectionString: 'postgres://root@127.0.0.1:1/test',
      connectionTimeoutMillis: 1_000,
    });
    down.on('error', () => {});
    const store = createPostgresStore(down, { notifications: false });
    const events: string[] = [];
    let runs = 0;
    const fn = async () => ++runs;
    const call = { toolName: 'lookup', turnId: 't1', args: {} };
    const closed = createIdempotency({ store, onEvent: (e) => events.push(e.outcome) });
    const error = await closed.run(call, fn).catch((e: unknown) => e);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect(runs).toBe(0);
    const open = createIdempotency({
      store,
      onStoreUnavailable: 'fail-open',
      onEvent: (e) => events.push(e.outcome),
    });
    expect(await open.run(call, fn)).toMatchObject({ value: 1, outcome: 'unguarded' });
    expect(events).toEqual(['store-unavailable', 'unguarded']);
    await store.close();
    await down.end();
  });
});
