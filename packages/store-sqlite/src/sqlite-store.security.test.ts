import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { InvalidInputError, StoreUnavailableError } from '@idempotent-tools/core';
import { runStoreFuzz } from '@idempotent-tools/testing';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import {
  createIdempotency,
  createSqliteStore,
  openSqliteStore,
  type SqliteStore,
} from './index.js';
import { betterDescribe } from './test-utils/better-sqlite3.js';

// Issue #10: hostile strings against a real SQLite file (both drivers), fail-open, table names.

const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-security-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const table = (): string => `t_${randomUUID().replaceAll('-', '')}`;

runStoreFuzz({
  name: 'sqlite store (node:sqlite)',
  describe,
  test,
  expect,
  runs: Number(process.env.FUZZ_RUNS) || 200,
  createStore: () => openSqliteStore(join(dir, 'fuzz-node.db'), { table: table() }),
});

runStoreFuzz({
  name: 'sqlite store (better-sqlite3)',
  describe: betterDescribe,
  test,
  expect,
  runs: Number(process.env.FUZZ_RUNS) || 200,
  createStore: () =>
    createSqliteStore(new Database(join(dir, 'fuzz-better.db')), { table: table() }),
  destroyStore: async (store: SqliteStore) => {
    await store.close();
    (store.database as Database.Database).close();
  },
});

describe('sqlite store: store unavailable', () => {
  test('fail-closed by default; fail-open runs the tool unguarded and says so', async () => {
    const db = new DatabaseSync(join(dir, `${randomUUID()}.db`));
    const store = createSqliteStore(db);
    db.close(); // the outage
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
    const result = await open.run(call, fn);
    expect(result).toMatchObject({ value: 1, replayed: false, outcome: 'unguarded' });
    expect(events).toEqual(['store-unavailable', 'unguarded']);
  });
});

describe('sqlite store: table names', () => {
  // The usual bad names are in sqlite-store.test.ts; these are the quoting and NUL cases.
  test.each(["x'; DROP TABLE y; --", 'a"b', 'a b', 'x\u0000'])(
    'rejects table %j with InvalidInputError',
    (name) => {
      const error = (() => {
        try {
          createSqliteStore(new DatabaseSync(':memory:'), { table: name });
        } catch (e) {
          return e;
        }
      })();
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe('table');
    },
  );
});
