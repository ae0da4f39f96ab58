import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createIdempotency, InvalidInputError } from '@idempotent-tools/core';
import {
  runStoreConformance,
  sleep,
  TIMER_SLACK_MS,
  uniqueKey,
  waitFor,
} from '@idempotent-tools/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { PgQueryable } from './change-listener.js';
import { createPostgresStore, type PostgresStore } from './postgres-store.js';
import { schemaSql } from './schema.js';
import { DATABASE_URL, postgresUp, testPool, uniqueName } from './test-utils/pg.js';
import {
  expectWokenByNotify,
  isLook,
  recordStatements,
  type SentStatement,
} from './test-utils/timing.js';

const pool = testPool({ label: 'conformance' });
const up = await postgresUp(pool);
/** One schema per run of this file; one table per test inside it (dropped with it). */
const schema = uniqueName('idt_test');
let tables = 0;

const claimInput = (
  key: string,
  overrides: Partial<Parameters<PostgresStore['claim']>[0]> = {},
) => ({
  key,
  fingerprint: 'fp-a',
  token: randomUUID(),
  leaseMs: 60_000,
  ttlMs: 120_000,
  ...overrides,
});

async function freshStore(
  options: Parameters<typeof createPostgresStore>[1] = {},
  db: PgQueryable = pool,
): Promise<PostgresStore> {
  const store = createPostgresStore(db, { schema, table: `t${tables++}`, ...options });
  await store.ensureSchema();
  return store;
}

async function dropStore(store: PostgresStore): Promise<void> {
  await store.close();
  await pool.query(`DROP TABLE IF EXISTS ${store.names.qualified}`);
}

/** A pool wrapper that counts statements (plain `query`: no LISTEN); `sent` has their replies. */
function counting(): PgQueryable & { texts: string[]; sent: SentStatement[] } {
  const texts: string[] = [];
  const db = {
    texts,
    query: (config: Parameters<PgQueryable['query']>[0]) => {
      texts.push(config.text);
      return pool.query(config);
    },
  };
  return Object.assign(db, { sent: recordStatements(db) });
}

/** Whether a waiter flagged the row of `key` (a complete or release of it will NOTIFY). */
async function flagged(store: PostgresStore, key: string): Promise<boolean> {
  const { rows } = await pool.query(`SELECT waiting FROM ${store.names.qualified} WHERE key = $1`, [
    key,
  ]);
  return rows[0]?.waiting === true;
}

beforeAll(async () => {
  if (up) await pool.query(`CREATE SCHEMA ${schema}`);
});

afterAll(async () => {
  if (up) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

describe('options', () => {
  test.each([
    ['schema', 'Public'],
    ['schema', 'a-b'],
    ['schema', ''],
    ['table', 'x"; DROP TABLE y; --'],
    ['table', '1abc'],
    ['table', 'a'.repeat(64)],
    ['table', 42],
  ])('rejects %s %j with InvalidInputError', (field, value) => {
    const error = (() => {
      try {
        createPostgresStore(pool, { [field]: value });
      } catch (e) {
        return e;
      }
    })();
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe(field);
  });

  test('rejects a missing pool, a bad channel and a bad purgeBatchSize', () => {
    const fields = [
      () => createPostgresStore(undefined as unknown as PgQueryable),
      () => createPostgresStore(pool, { channel: 'has space' }),
      () => createPostgresStore(pool, { channel: 'x'.repeat(64) }),
      () => createPostgresStore(pool, { purgeBatchSize: 0 }),
      () => createPostgresStore(pool, { purgeBatchSize: 1.5 }),
    ].map((make) => {
      try {
        make();
      } catch (error) {
        return InvalidInputError.isInstance(error) ? error.field : 'other';
      }
      return 'none';
    });
    expect(fields).toEqual(['pool', 'channel', 'channel', 'purgeBatchSize', 'purgeBatchSize']);
  });

  test('names: defaults, long names hashed within 63 bytes, capabilities', () => {
    const store = createPostgresStore(pool);
    expect(store.names.qualified).toBe('"public"."idempotency_records"');
    expect(store.names.channel).toBe('idempotent_tools.public.idempotency_records');
    expect(store.capabilities).toEqual({ notifiesChanges: true, durable: true });
    const long = createPostgresStore(pool, { schema: 's'.repeat(63), table: 't'.repeat(63) });
    expect(long.names.index.length).toBeLessThanOrEqual(63);
    expect(long.names.channel.length).toBeLessThanOrEqual(63);
    const other = createPostgresStore(pool, {
      schema: 's'.repeat(63),
      table: `${'t'.repeat(62)}u`,
    });
    expect(other.names.index).not.toBe(long.names.index);
    // No way to LISTEN (plain query function) or notifications off: waiters poll.
    expect(createPostgresStore({ query: pool.query.bind(pool) }).capabilities.notifiesChanges).toBe(
      false,
    );
    const quiet = createPostgresStore(pool, { notifications: false });
    expect(quiet.capabilities.notifiesChanges).toBe(false);
    expect(quiet.waitForChange).toBeUndefined();
  });

  test('sql/schema.sql is schemaSql() with the default names', () => {
    const file = readFileSync(new URL('../sql/schema.sql', import.meta.url), 'utf8');
    expect(file).toBe(schemaSql());
    expect(schemaSql({ schema: 'app', table: 'calls' })).toContain('CREATE SCHEMA "app"');
  });
});

describe.skipIf(!up)('postgres store', () => {
  runStoreConformance({
    name: 'conformance',
    describe,
    test,
    expect,
    clock: 'real',
    createStore: ({ timeoutMs }) => freshStore({ timeoutMs }),
    destroyStore: dropStore,
    raw: {
      count: async (store) => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM ${store.names.qualified}`,
        );
        return rows[0].n as number;
      },
    },
    // A finished row without its outcome: what the store cannot replay.
    corruptRecord: async (store, key) => {
      await pool.query(
        `INSERT INTO ${store.names.qualified} (key, state, fingerprint, token, lease_expires_at, expires_at, created_at)
         VALUES ($1, 'completed', 'fp', 'tok', 0, 8000000000000, 0)
         ON CONFLICT (key) DO UPDATE SET state = 'completed', outcome = NULL`,
        [key],
      );
    },
  });

  runStoreConformance({
    name: 'conformance (notifications and prepared statements off)',
    describe,
    test,
    expect,
    clock: 'real',
    createStore: ({ timeoutMs }) =>
      freshStore({ notifications: false, preparedStatements: false, timeoutMs }),
    destroyStore: dropStore,
  });

  describe('schema', () => {
    test('ensureSchema from many connections at once, into a new schema, is safe and idempotent', async () => {
      const target = { schema: uniqueName('idt_test_new'), table: 'select' }; // a reserved word
      const pools = Array.from(
        { length: 8 },
        () => new pg.Pool({ connectionString: DATABASE_URL, max: 1 }),
      );
      try {
        const stores = pools.map((p) => createPostgresStore(p, target));
        for (let round = 0; round < 2; round++) {
          await Promise.all(stores.map((store) => store.ensureSchema()));
        }
        const store = stores[0]!;
        const input = claimInput('k');
        expect((await store.claim(input)).status).toBe('acquired');
        expect((await stores[1]!.claim(claimInput('k'))).status).toBe('in_progress');
        const { rows } = await pool.query(
          `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'select' ORDER BY 1`,
          [target.schema],
        );
        expect(rows.map((r) => r.indexname)).toEqual(['select_expires_at_idx', 'select_pkey']);
      } finally {
        await Promise.all(pools.map((p) => p.end()));
        await pool.query(`DROP SCHEMA IF EXISTS ${target.schema} CASCADE`);
      }
    });

    test('a missing table is a StoreUnavailableError that says to create it', async () => {
      const store = createPostgresStore(pool, { schema, table: uniqueName('missing') });
      const error = await store.claim(claimInput('k')).catch((e: unknown) => e);
      expect((error as { code?: string }).code).toBe('store_unavailable');
      expect((error as Error).message).toContain('ensureSchema()');
    });
  });

  describe('round trips and retries', () => {
    test('a replay is one statement, a fresh call two (claim + complete)', async () => {
      const db = counting();
      const store = await freshStore({}, db);
      try {
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'charge', turnId: 't1', args: { amount: 5 } };
        db.texts.length = 0;
        const first = await idempotency.run(call, () => ({ id: 'ch_1' }));
        expect(first.replayed).toBe(false);
        expect(db.texts.length).toBe(2);
        db.texts.length = 0;
        const again = await idempotency.run(call, () => ({ id: 'ch_2' }));
        expect(again).toMatchObject({ replayed: true, value: { id: 'ch_1' } });
        expect(db.texts.length).toBe(1);
      } finally {
        await dropStore(store);
      }
    });

    test('concurrent claims of a finished key share one statement; of a free key they do not', async () => {
      const db = counting();
      const store = await freshStore({ notifications: false }, db);
      try {
        const key = uniqueKey('coalesce');
        const owner = claimInput(key);
        await store.claim(owner);
        await store.complete({ ...owner, state: 'completed', outcome: '7', ttlMs: 120_000 });
        db.texts.length = 0;
        const replays = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            store.claim(claimInput(key, { fingerprint: i === 3 ? 'other' : 'fp-a' })),
          ),
        );
        expect(db.texts).toHaveLength(1);
        expect(replays.filter((r) => r.status === 'completed')).toHaveLength(29);
        expect(replays[3]).toMatchObject({ status: 'drift', record: { outcome: '7' } });
        db.texts.length = 0;
        const free = uniqueKey('coalesce-free');
        const racers = await Promise.all(
          Array.from({ length: 10 }, () => store.claim(claimInput(free))),
        );
        expect(racers.filter((r) => r.status === 'acquired')).toHaveLength(1);
        expect(racers.filter((r) => r.status === 'in_progress')).toHaveLength(9);
        expect(db.texts.length).toBeGreaterThanOrEqual(10);
      } finally {
        await dropStore(store);
      }
    });

    test('a row committed after the claim snapshot is reported by a re-run (no empty answer)', async () => {
      const db = counting();
      const store = await freshStore({}, db);
      const holder = new pg.Client({ connectionString: DATABASE_URL });
      await holder.connect();
      try {
        const key = uniqueKey('late');
        const token = randomUUID();
        await holder.query('BEGIN');
        await holder.query(
          `INSERT INTO ${store.names.qualified} (key, state, fingerprint, token, lease_expires_at, expires_at, created_at)
           SELECT $1, 'in_progress', 'fp-a', $2, ms + 60000, ms + 120000, ms
           FROM (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) c`,
          [key, token],
        );
        db.texts.length = 0;
        const claiming = store.claim(claimInput(key));
        // Wait until the claim blocks on the uncommitted insert (however long that takes), then
        // commit it.
        await waitFor('the claim to block on the uncommitted row', async () => {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [pool.applicationName],
          );
          return rows[0].n > 0;
        });
        await holder.query('COMMIT');
        const result = await claiming;
        expect(result.status).toBe('in_progress');
        expect(result.record.token).toBe(token);
        expect(db.texts.length).toBe(2); // the first statement saw the conflict but not the row
      } finally {
        await holder.end();
        await dropStore(store);
      }
    });

    test('purgeExpired deletes in batches and counts them all', async () => {
      const store = await freshStore({ purgeBatchSize: 3 });
      try {
        const base = uniqueKey('purge');
        for (let i = 0; i < 10; i++) {
          await store.claim(claimInput(`${base}-${i}`, { leaseMs: 10, ttlMs: 20 }));
        }
        await store.claim(claimInput(`${base}-live`));
        await sleep(60);
        expect(await store.purgeExpired()).toBe(10);
        expect(await store.purgeExpired()).toBe(0);
        expect((await store.get(`${base}-live`))?.state).toBe('in_progress');
      } finally {
        await dropStore(store);
      }
    });
  });

  describe('text limits', () => {
    test('NUL and lone surrogates are refused (typed), while JSON outcomes escape them', async () => {
      const store = await freshStore();
      try {
        const key = uniqueKey('nul');
        const owner = claimInput(key);
        await store.claim(owner);
        for (const outcome of ['a\u0000b', 'x\uD800y']) {
          const error = await store
            .complete({ key, token: owner.token, state: 'completed', outcome, ttlMs: 1000 })
            .catch((e: unknown) => e);
          expect(InvalidInputError.isInstance(error)).toBe(true);
        }
        const metaError = await store
          .claim(claimInput(uniqueKey('nul'), { meta: { scope: 'a\u0000' } }))
          .catch((e: unknown) => e);
        expect((metaError as InvalidInputError).field).toBe('meta.scope');
        expect(await store.release(`${key}\u0000`, owner.token)).toBe(false);

        // The executor stores JSON.stringify output: NUL and lone surrogates arrive escaped.
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'echo', turnId: randomUUID(), args: {} };
        const value = { text: 'nul \u0000 lone \uD800 end' };
        expect((await idempotency.run(call, () => value)).replayed).toBe(false);
        const replay = await idempotency.run(call, () => ({ text: 'again' }));
        expect(replay).toMatchObject({ replayed: true, value });
      } finally {
        await dropStore(store);
      }
    });
  });

  describe('LISTEN/NOTIFY', () => {
    test('a waiter on another pool wakes when a writer completes', async () => {
      const otherPool = testPool({ label: 'other', max: 2 });
      const writer = await freshStore();
      const reader = createPostgresStore(otherPool, { schema, table: writer.names.table });
      const sent = recordStatements(otherPool);
      try {
        const key = uniqueKey('notify');
        const owner = claimInput(key);
        await writer.claim(owner);
        expect((await reader.claim(claimInput(key))).status).toBe('in_progress');
        const ms = await expectWokenByNotify({
          waiter: reader,
          sent,
          key,
          timeoutMs: 300_000, // a hang detector: the wake-up is what is asserted
          change: () =>
            writer.complete({
              key,
              token: owner.token,
              state: 'completed',
              outcome: '"x"',
              ttlMs: 10_000,
            }),
        });
        console.info(
          `[store-postgres] NOTIFY: complete -> waiter on another pool woken in ${ms.toFixed(1)} ms`,
        );
      } finally {
        await reader.close();
        await dropStore(writer);
        await otherPool.end();
      }
    });

    test('NOTIFY only for a row a waiter flagged; ensureSchema adds the flag to an old table', async () => {
      const writer = await freshStore();
      const listener = new pg.Client({ connectionString: DATABASE_URL });
      await listener.connect();
      const heard: string[] = [];
      listener.on('notification', (message) => heard.push(message.payload ?? ''));
      await listener.query(`LISTEN "${writer.names.channel}"`);
      try {
        const quiet = claimInput(uniqueKey('quiet'));
        await writer.claim(quiet);
        await writer.complete({ ...quiet, state: 'completed', outcome: '1', ttlMs: 10_000 });
        const waited = claimInput(uniqueKey('waited'));
        await writer.claim(waited);
        const waiting = writer.waitForChange!(waited.key, 20_000);
        await waitFor('the waiter to flag the row', () => flagged(writer, waited.key));
        await writer.complete({ ...waited, state: 'completed', outcome: '1', ttlMs: 10_000 });
        await waiting;
        // NOTIFYs arrive in commit order: once the waited one is here, a quiet one would be too.
        await waitFor('the NOTIFY', () => heard.includes(waited.key));
        expect(heard).toEqual([waited.key]);

        // A table created by the DDL without the column gets it from ensureSchema.
        await pool.query(`ALTER TABLE ${writer.names.qualified} DROP COLUMN waiting`);
        await writer.ensureSchema();
        const again = claimInput(uniqueKey('again'));
        expect((await writer.claim(again)).status).toBe('acquired');
      } finally {
        await listener.end();
        await dropStore(writer);
      }
    });

    test('a change between the claim and the first LISTEN is not missed', async () => {
      const otherPool = testPool({ label: 'gap', max: 2 });
      const writer = await freshStore();
      const reader = createPostgresStore(otherPool, { schema, table: writer.names.table });
      try {
        for (const finish of ['complete', 'release'] as const) {
          const key = uniqueKey(`gap-${finish}`);
          const owner = claimInput(key);
          await writer.claim(owner);
          expect((await reader.claim(claimInput(key))).status).toBe('in_progress');
          // The holder finishes before the reader listens: no NOTIFY reaches it.
          if (finish === 'complete') {
            await writer.complete({
              key,
              token: owner.token,
              state: 'completed',
              outcome: '1',
              ttlMs: 10_000,
            });
          } else {
            await writer.release(key, owner.token);
          }
          const timeoutMs = 300_000; // a hang detector: the wake-up is what is asserted
          const start = performance.now();
          await reader.waitForChange!(key, timeoutMs);
          // Its look after LISTEN saw the change and ended the wait, not the timer.
          expect(performance.now() - start).toBeLessThan(timeoutMs - TIMER_SLACK_MS);
        }
      } finally {
        await reader.close();
        await dropStore(writer);
        await otherPool.end();
      }
    });

    test('a killed LISTEN connection wakes waiters, and the next wait listens again', async () => {
      const otherPool = testPool({ label: 'listener', max: 3 });
      const writer = await freshStore();
      const reader = createPostgresStore(otherPool, { schema, table: writer.names.table });
      const sent = recordStatements(otherPool);
      try {
        const key = uniqueKey('killed');
        const owner = claimInput(key);
        await writer.claim(owner);
        const timeoutMs = 300_000; // a hang detector: the wake-up is what is asserted
        const start = performance.now();
        const first = reader.waitForChange!(key, timeoutMs);
        // Once it listens and looked at the record (still running), kill its LISTEN connection.
        await waitFor('the waiter to listen and look at the record', () => sent.some(isLook));
        expect((await sent.find(isLook)!.reply).rows[0]?.running).toBe(true);
        const { rows } = await pool.query(
          `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`,
          [otherPool.applicationName],
        );
        expect(rows.map((row) => row.killed)).toEqual([true]);
        await first;
        // Woken by the lost connection: nothing changed, and its timer was 20 s away.
        expect(performance.now() - start).toBeLessThan(timeoutMs - TIMER_SLACK_MS);

        // The next wait listens again: the release's NOTIFY wakes it.
        await expectWokenByNotify({
          waiter: reader,
          sent,
          key,
          timeoutMs,
          change: () => writer.release(key, owner.token),
        });
      } finally {
        await reader.close();
        await dropStore(writer);
        await otherPool.end();
      }
    });

    test('listenClient: waiters listen on it; close() unlistens and leaves it open', async () => {
      const listenClient = new pg.Client({ connectionString: DATABASE_URL });
      await listenClient.connect();
      const db = counting();
      const store = await freshStore({ listenClient }, db);
      try {
        expect(store.capabilities.notifiesChanges).toBe(true);
        const key = uniqueKey('listen-client');
        const owner = claimInput(key);
        await store.claim(owner);
        await expectWokenByNotify({
          waiter: store,
          sent: db.sent,
          key,
          timeoutMs: 300_000, // a hang detector: the wake-up is what is asserted
          change: () => store.release(key, owner.token),
        });
        await store.close();
        expect(listenClient.listenerCount('notification')).toBe(0);
        const { rows } = await listenClient.query(
          'SELECT count(*)::int AS n FROM pg_listening_channels()',
        );
        expect(rows[0].n).toBe(0);
      } finally {
        await listenClient.end();
        await dropStore(store);
      }
    });

    test('a single pg.Client serves queries and LISTEN; close() leaves it open', async () => {
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      const writer = await freshStore();
      const store = createPostgresStore(client, { schema, table: writer.names.table });
      const sent = recordStatements(client);
      try {
        expect(store.capabilities.notifiesChanges).toBe(true);
        const key = uniqueKey('client');
        const owner = claimInput(key);
        expect((await store.claim(owner)).status).toBe('acquired');
        await expectWokenByNotify({
          waiter: store,
          sent,
          key,
          timeoutMs: 300_000, // a hang detector: the wake-up is what is asserted
          change: () =>
            writer.complete({
              key,
              token: owner.token,
              state: 'completed',
              outcome: '"done"',
              ttlMs: 10_000,
            }),
        });
        await store.close();
        expect((await client.query('SELECT 1 AS one')).rows[0].one).toBe(1);
        expect(client.listenerCount('notification')).toBe(0);
      } finally {
        await client.end();
        await dropStore(writer);
      }
    });
  });
});
