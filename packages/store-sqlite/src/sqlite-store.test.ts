import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  InvalidInputError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { createTestClock, runStoreConformance } from '@idempotent-tools/testing';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import {
  createIdempotency,
  createSqliteStore,
  openSqliteStore,
  type SqliteDatabaseLike,
  type SqliteStore,
} from './index.js';
import { betterDescribe, betterTest } from './test-utils/better-sqlite3.js';

const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A table of its own for every store: tests never see each other's rows. */
const table = (): string => `t_${randomUUID().replaceAll('-', '')}`;

function countRows(store: SqliteStore): Promise<number> {
  const row = store.database.prepare(`SELECT count(*) AS n FROM "${store.table}"`).get();
  return Promise.resolve(Number((row as { n: number | bigint }).n));
}

/** Far in the future on every clock the tests use: a row that never expires during a test. */
const FAR = 8_000_000_000_000;

/**
 * Write a row under `key` with the raw connection: the store's columns, `values` overriding a
 * live completed row (whose outcome is missing unless given).
 */
function writeRow(store: SqliteStore, key: string, values: Record<string, unknown> = {}): void {
  const row: Record<string, unknown> = {
    key,
    state: 'completed',
    fingerprint: 'fp',
    token: 'tok',
    lease_expires_at: 0,
    expires_at: FAR,
    created_at: 0,
    completed_at: 0,
    outcome: null,
    ...values,
  };
  const columns = Object.keys(row);
  store.database
    .prepare(
      `INSERT OR REPLACE INTO "${store.table}" (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
    )
    .run(...(Object.values(row) as never[]));
}

/** A finished row without its outcome: the store cannot replay it. */
const corruptRecord = async (store: SqliteStore, key: string) => writeRow(store, key);

// node:sqlite and better-sqlite3 link separate copies of SQLite: within one process they must
// not open the same file (their POSIX locks do not see each other), so each driver has its own.
const nodeFile = join(dir, 'node.db');
const betterFile = join(dir, 'better.db');

function betterStore(now?: () => number): SqliteStore {
  const db = new Database(betterFile);
  return createSqliteStore(db, { table: table(), ...(now === undefined ? {} : { now }) });
}
async function destroyBetter(store: SqliteStore): Promise<void> {
  await store.close();
  (store.database as Database.Database).close();
}

for (const clock of ['virtual', 'real'] as const) {
  runStoreConformance({
    name: `sqlite store (node:sqlite), ${clock} clock`,
    describe,
    test,
    expect,
    clock,
    createStore: ({ clock: c }) =>
      openSqliteStore(nodeFile, { table: table(), ...(clock === 'virtual' ? { now: c.now } : {}) }),
    raw: { count: countRows },
    corruptRecord,
  });

  runStoreConformance({
    name: `sqlite store (better-sqlite3), ${clock} clock`,
    describe: betterDescribe,
    test,
    expect,
    clock,
    createStore: ({ clock: c }) => betterStore(clock === 'virtual' ? c.now : undefined),
    destroyStore: destroyBetter,
    raw: { count: countRows },
    corruptRecord,
  });
}

const claimInput = (key: string, ttlMs = 60_000) => ({
  key,
  fingerprint: 'fp',
  token: randomUUID(),
  leaseMs: Math.min(ttlMs, 30_000),
  ttlMs,
});

describe('createSqliteStore', () => {
  betterTest('takes both drivers, typed structurally', async () => {
    const nodeDb: SqliteDatabaseLike = new DatabaseSync(':memory:');
    const betterDb: SqliteDatabaseLike = new Database(':memory:');
    const stores = [createSqliteStore(nodeDb), createSqliteStore(betterDb)];
    expect(stores.map((s) => s.driver)).toEqual(['node:sqlite', 'better-sqlite3']);
    for (const store of stores) {
      expect(store.capabilities).toEqual({ notifiesChanges: false, durable: true });
      expect(store.name).toBe('sqlite');
      expect(store.table).toBe('idempotency_records');
      expect((await store.claim(claimInput('k'))).status).toBe('acquired');
    }
  });

  test('rejects what is not a SQLite connection', () => {
    for (const db of [null, {}, { prepare() {} }, 'file.db']) {
      const error = catchError(() => createSqliteStore(db as unknown as SqliteDatabaseLike));
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe('db');
    }
  });

  test('validates the table name and the options', () => {
    const db = new DatabaseSync(':memory:');
    const bad: [string, object][] = [
      ['table', { table: '' }],
      ['table', { table: '1records' }],
      ['table', { table: 'my-records' }],
      ['table', { table: 'records"; DROP TABLE x; --' }],
      ['table', { table: 'r'.repeat(64) }],
      ['table', { table: 'sqlite_records' }],
      ['table', { table: 'récords' }],
      ['busyTimeoutMs', { busyTimeoutMs: -1 }],
      ['busyTimeoutMs', { busyTimeoutMs: 1.5 }],
      ['sweepEvery', { sweepEvery: -1 }],
      ['sweepBatch', { sweepBatch: 0 }],
      ['synchronous', { synchronous: 'OFF' }],
      ['now', { now: 123 }],
    ];
    for (const [field, options] of bad) {
      const error = catchError(() => createSqliteStore(db, options));
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe(field);
    }
    expect(createSqliteStore(db, { table: `_${'r'.repeat(62)}` }).table).toHaveLength(63);
    expect(createSqliteStore(db, { table: 'Records_2' }).table).toBe('Records_2');
  });

  betterTest(
    'a record another connection writes between the read and the upsert is never overwritten',
    async () => {
      // The interloper is a trigger firing inside our INSERT, just before its conflict check: the
      // interleaving of two processes, made deterministic.
      for (const db of [new DatabaseSync(':memory:'), new Database(':memory:')]) {
        const store = createSqliteStore(db);
        db.exec(`CREATE TEMP TRIGGER other_process_wins BEFORE INSERT ON main.idempotency_records
        WHEN NEW.token = 'mine' BEGIN
          INSERT INTO main.idempotency_records
            (key, state, fingerprint, token, lease_expires_at, expires_at, created_at, outcome)
          VALUES (NEW.key, CASE WHEN NEW.key = 'done' THEN 'completed' ELSE 'in_progress' END,
            NEW.fingerprint, 'theirs', NEW.lease_expires_at, NEW.expires_at, NEW.created_at,
            CASE WHEN NEW.key = 'done' THEN '"their outcome"' END);
        END`);
        for (const [key, status] of [
          ['running', 'in_progress'],
          ['done', 'completed'],
        ] as const) {
          const result = await store.claim({ ...claimInput(key), token: 'mine' });
          expect(result.status).toBe(status);
          expect(result.record.token).toBe('theirs');
          expect((await store.get(key))?.token).toBe('theirs');
        }
        expect((await store.get('done'))?.outcome).toBe('"their outcome"');
      }
    },
  );

  betterTest(
    'a row the store did not write is a RecordIntegrityError (corrupt), never replayed and never store_unavailable',
    async () => {
      for (const db of [new DatabaseSync(':memory:'), new Database(':memory:')]) {
        const store = createSqliteStore(db);
        const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
        const rows: Array<[string, Record<string, unknown>]> = [
          ['a finished row without outcome', {}],
          ['a failed row without outcome', { state: 'failed' }],
          ['an unknown state', { state: 'done', outcome: '{"v":1}' }],
          ['a time that is text', { expires_at: 'tomorrow', outcome: '{"v":1}' }],
          ['a fractional time', { lease_expires_at: 1.5, state: 'in_progress', outcome: null }],
          ['a token that is a blob', { token: new Uint8Array([1, 2]), outcome: '{"v":1}' }],
          ['an outcome that is a blob', { outcome: new Uint8Array([123, 125]) }],
        ];
        for (const [label, values] of rows) {
          const call = { toolName: 't', turnId: `turn-${randomUUID()}`, args: {} };
          const { key } = idempotency.keyOf(call);
          writeRow(store, key, values);
          for (const op of [() => store.claim(claimInput(key)), () => store.get(key)]) {
            const error = await op().then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(RecordIntegrityError.isInstance(error), label).toBe(true);
            expect((error as RecordIntegrityError).reason).toBe('corrupt');
          }
          let runs = 0;
          const error = await idempotency
            .run(call, () => ++runs)
            .then(
              () => undefined,
              (e: unknown) => e,
            );
          expect(RecordIntegrityError.isInstance(error), label).toBe(true);
          expect(runs).toBe(0);
        }
        db.close();
      }
    },
  );

  test('sets WAL, the busy timeout and synchronous on the connection', async () => {
    for (const [options, timeout, synchronous] of [
      [{}, 5000, 1],
      [{ busyTimeoutMs: 1234, synchronous: 'FULL' as const }, 1234, 2],
    ] as const) {
      const file = join(dir, `pragmas-${randomUUID()}.db`);
      const store = openSqliteStore(file, options);
      const pragma = (name: string) =>
        Object.values(store.database.prepare(`PRAGMA ${name}`).get() as object)[0];
      expect(pragma('journal_mode')).toBe('wal');
      expect(pragma('busy_timeout')).toBe(timeout);
      expect(pragma('synchronous')).toBe(synchronous);
      await store.close();
    }
    // wal: false leaves the journal mode alone.
    const file = join(dir, `rollback-${randomUUID()}.db`);
    const store = openSqliteStore(file, { wal: false });
    expect(store.database.prepare('PRAGMA journal_mode').get()).toEqual({ journal_mode: 'delete' });
    await store.close();
  });

  test('tables are independent keyspaces in one file', async () => {
    const [a, b] = [openSqliteStore(nodeFile, { table: table() }), openSqliteStore(nodeFile)];
    const input = claimInput(`key-${randomUUID()}`);
    expect((await a.claim(input)).status).toBe('acquired');
    expect(await b.get(input.key)).toBeUndefined();
    expect((await b.claim({ ...input, token: randomUUID() })).status).toBe('acquired');
    await a.close();
    await b.close();
  });

  betterTest('records survive closing and reopening the file (durable)', async () => {
    const file = join(dir, `durable-${randomUUID()}.db`);
    const first = openSqliteStore(file);
    const input = { ...claimInput('k'), meta: { toolName: 'charge', scope: 'acme', turnId: 't1' } };
    await first.claim(input);
    await first.complete({
      key: 'k',
      token: input.token,
      state: 'completed',
      outcome: '"ü"',
      ttlMs: 60_000,
    });
    const before = await first.get('k');
    await first.close();
    const db = new Database(file);
    const second = createSqliteStore(db);
    expect(await second.get('k')).toEqual(before);
    const replay = await second.claim({ ...input, token: randomUUID() });
    expect(replay).toEqual({ status: 'completed', record: before });
    db.close();
  });

  betterTest('integers come back as numbers when the connection reads bigints', async () => {
    const nodeDb = new DatabaseSync(':memory:', { readBigInts: true });
    const betterDb = new Database(':memory:');
    betterDb.defaultSafeIntegers(true);
    for (const db of [nodeDb, betterDb]) {
      const store = createSqliteStore(db);
      const input = claimInput('k');
      const claimed = await store.claim(input);
      expect(typeof claimed.record.createdAt).toBe('number');
      expect(
        await store.complete({
          key: 'k',
          token: input.token,
          state: 'completed',
          outcome: 'x',
          ttlMs: 60_000,
        }),
      ).toBe(true);
      const record = await store.get('k');
      expect(typeof record?.completedAt).toBe('number');
      expect(typeof record?.expiresAt).toBe('number');
      expect(await store.purgeExpired()).toBe(0);
    }
  });

  test('amortised cleanup keeps the table bounded without purgeExpired', async () => {
    const clock = createTestClock({ mode: 'virtual' });
    const db = new DatabaseSync(':memory:');
    const swept = createSqliteStore(db, {
      table: 'swept',
      now: clock.now,
      sweepEvery: 50,
      sweepBatch: 100,
    });
    const unswept = createSqliteStore(db, { table: 'unswept', now: clock.now, sweepEvery: 0 });
    let most = 0;
    for (let i = 0; i < 3000; i++) {
      // Each record lives 20 ms; the clock moves 1 ms per call.
      for (const store of [swept, unswept]) await store.claim(claimInput(`k${i}`, 20));
      await clock.advance(1);
      if (i % 10 === 0) most = Math.max(most, await countRows(swept));
    }
    expect(await countRows(unswept)).toBe(3000);
    expect(most).toBeLessThanOrEqual(20 + 100);
    expect(await countRows(swept)).toBeLessThanOrEqual(20 + 100);
    expect(await swept.purgeExpired()).toBeGreaterThan(0);
    expect(await countRows(swept)).toBeLessThanOrEqual(20);
  });

  test('waitForChange wakes waiters of every store of this process on the same file', async () => {
    const table0 = table();
    const [a, b] = [
      openSqliteStore(nodeFile, { table: table0 }),
      openSqliteStore(nodeFile, { table: table0 }),
    ];
    const input = claimInput(`k-${randomUUID()}`);
    await a.claim(input);
    let woken = false;
    const waiting = b.waitForChange(input.key, 20_000).then(() => {
      woken = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(woken).toBe(false);
    await a.complete({
      key: input.key,
      token: input.token,
      state: 'completed',
      outcome: '1',
      ttlMs: 60_000,
    });
    // complete() itself woke it, no timer: it is awake before the next turn of the event loop,
    // however slow the machine (its own timer was 20 s away).
    await new Promise((resolve) => setImmediate(resolve));
    expect(woken).toBe(true);
    await waiting;
    await a.close();
    await b.close();
  });

  test('openSqliteStore owns its connection; createSqliteStore never closes yours', async () => {
    const opened = openSqliteStore(join(dir, `owned-${randomUUID()}.db`));
    await opened.close();
    expect((opened.database as DatabaseSync).isOpen).toBe(false);
    const db = new DatabaseSync(':memory:');
    const store = createSqliteStore(db);
    await store.close();
    await store.close();
    expect(db.isOpen).toBe(true);
    const error = await store.get('k').catch((e: unknown) => e);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
  });

  test('openSqliteStore: a bad path is StoreUnavailableError, an empty one InvalidInputError', () => {
    const missing = catchError(() => openSqliteStore(join(dir, 'no-such-dir', 'x.db')));
    expect(StoreUnavailableError.isInstance(missing)).toBe(true);
    expect((missing as Error).message).toContain('no-such-dir');
    expect(InvalidInputError.isInstance(catchError(() => openSqliteStore('')))).toBe(true);
  });

  test('a closed connection is StoreUnavailableError; after db.open() the store works again', async () => {
    const file = join(dir, `reopen-${randomUUID()}.db`);
    const db = new DatabaseSync(file);
    const store = createSqliteStore(db, { busyTimeoutMs: 777 });
    const done = claimInput('done');
    await store.claim(done);
    await store.complete({
      key: 'done',
      token: done.token,
      state: 'completed',
      outcome: '"v"',
      ttlMs: 60_000,
    });

    db.close();
    for (const op of [
      () => store.claim(claimInput('new')),
      () => store.get('done'),
      () => store.purgeExpired(),
    ]) {
      const error = await op().catch((e: unknown) => e);
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect((error as Error).message).toContain('connection is closed');
    }
    db.open();
    expect((await store.claim(claimInput('done'))).status).toBe('completed');
    expect(db.prepare('PRAGMA busy_timeout').get()).toEqual({ timeout: 777 });

    // Closed and reopened between two calls: the finalised statements are prepared again.
    db.close();
    db.open();
    expect((await store.claim(claimInput('new'))).status).toBe('acquired');
    expect(db.prepare('PRAGMA busy_timeout').get()).toEqual({ timeout: 777 });
    db.close();
  });

  betterTest(
    'a write lock held past busyTimeoutMs is StoreUnavailableError; replays still read',
    async () => {
      for (const driver of ['node:sqlite', 'better-sqlite3'] as const) {
        const file = join(dir, `busy-${randomUUID()}.db`);
        const open = (): SqliteDatabaseLike =>
          driver === 'node:sqlite' ? new DatabaseSync(file) : new Database(file);
        const db = open();
        const store = createSqliteStore(db, { busyTimeoutMs: 100 });
        const idempotency = createIdempotency({ store });
        const done = await idempotency.run({ toolName: 't', turnId: '1', args: {} }, () => 'first');

        const locker = open();
        locker.exec('BEGIN IMMEDIATE');
        let ran = 0;
        const error = await idempotency
          .run({ toolName: 't', turnId: '2', args: {} }, () => ++ran)
          .catch((e: unknown) => e);
        expect((error as StoreUnavailableError).code).toBe('store_unavailable');
        expect((error as Error).message).toContain('busyTimeoutMs (100 ms)');
        expect(ran).toBe(0);
        // WAL: readers never wait for the writer, so a replay needs no lock.
        const replay = await idempotency.run(
          { toolName: 't', turnId: '1', args: {} },
          () => 'again',
        );
        expect(replay).toMatchObject({ value: done.value, replayed: true });
        locker.exec('COMMIT');

        const after = await idempotency.run({ toolName: 't', turnId: '2', args: {} }, () => ++ran);
        expect(after).toMatchObject({ value: 1, replayed: false });
        locker.close();
        db.close();
      }
    },
  );
});

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}
