/**
 * Faults on a real PostgreSQL: replies lost after the commit (a TCP proxy on 127.0.0.1 swallows
 * the server's reply, through ReadyForQuery, and cuts the connection: the statement committed,
 * the client saw an error), a pool of `max: 1` (LISTEN must never take its only connection), and
 * rows the store did not write.
 */
import { randomUUID } from 'node:crypto';
import {
  createIdempotency,
  IdempotencyError,
  InProgressError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { TIMER_SLACK_MS, uniqueKey, waitFor } from '@idempotent-tools/testing';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPostgresStore, type PostgresStore } from './postgres-store.js';
import type { PostgresClient } from './resolve-driver.js';
import { type DriverCase, pgCase, postgresJsCase } from './test-utils/drivers.js';
import { DATABASE_URL, postgresUp, testPool, uniqueName } from './test-utils/pg.js';
import { type CommitProxy, startCommitProxy } from './test-utils/proxy.js';

const pool = testPool({ label: 'faults' });
const up = await postgresUp(pool);
const schema = uniqueName('idt_faults');
let tables = 0;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  if (up) await pool.query(`CREATE SCHEMA ${schema}`);
});
afterAll(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
  if (up) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

async function freshStore(
  db: PostgresClient = pool,
  table = `t${tables++}`,
): Promise<PostgresStore> {
  const store = createPostgresStore(db, { schema, table });
  await store.ensureSchema();
  cleanup.push(() => store.close());
  return store;
}

const claimInput = (key: string, leaseMs = 60_000) => ({
  key,
  fingerprint: 'fp',
  token: randomUUID(),
  leaseMs,
  ttlMs: 120_000,
});

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

/**
 * A store on a pool of one connection through a proxy, and a store on the direct pool over the
 * same table (to see what committed). The proxied connection is warm: a reply swallowed next is
 * the next statement's.
 */
async function proxied(driver: DriverCase): Promise<{
  store: PostgresStore;
  direct: PostgresStore;
  proxy: CommitProxy;
}> {
  const direct = await freshStore();
  const target = new URL(DATABASE_URL);
  const proxy = await startCommitProxy({
    host: target.hostname,
    port: Number(target.port || 5432),
  });
  cleanup.push(() => proxy.close());
  target.port = String(proxy.port);
  const via = await driver.open({ label: 'faults_via', url: target.toString(), max: 1 });
  cleanup.push(() => via.end());
  const store = createPostgresStore(via.client, { schema, table: direct.names.table });
  cleanup.push(() => store.close());
  const warm = claimInput(uniqueKey('warm'));
  await store.claim(warm);
  await store.complete({ ...warm, state: 'completed', outcome: '1', ttlMs: 10_000 });
  // postgres.js describes a statement on its first use on a connection (a round trip of its
  // own, which the proxy would swallow instead): use every statement once.
  const takeover = { key: warm.key, staleToken: 'none', token: randomUUID(), leaseMs: 1, ttlMs: 1 };
  expect(await store.takeover(takeover)).toBe(false);
  return { store, direct, proxy };
}

/**
 * Per network driver (pg, postgres.js; neither re-sends a statement itself). PGlite has no
 * connection whose reply could be lost: the statement and its answer are one call in-process.
 */
describe.skipIf(!up).each([pgCase, postgresJsCase])(
  'postgres store on $name: a reply lost after the commit',
  (driver) => {
    test('a claim whose connection dropped after the commit, sent again with its token, answers acquired', async () => {
      const { store, direct, proxy } = await proxied(driver);
      const key = uniqueKey('lost-claim');
      const input = claimInput(key);
      proxy.dropNextReply();
      const lost = await errorOf(store.claim(input));
      expect(proxy.dropped).toBe(1);
      expect(StoreUnavailableError.isInstance(lost)).toBe(true);
      const committed = await direct.get(key);
      expect(committed?.token).toBe(input.token); // it did commit
      const again = await store.claim(input);
      expect(again.status).toBe('acquired');
      expect(again.record).toEqual(committed);
      expect(await direct.get(key)).toEqual(committed);
      expect((await direct.claim(claimInput(key))).status).toBe('in_progress');
    });

    test('issue 26: a claim whose reply was lost, then a 2 s outage: the retry after it runs the tool, never outcome_unknown', async () => {
      const { store, proxy } = await proxied(driver);
      const idempotency = createIdempotency({ store, lease: 1_000 });
      const call = { toolName: 'pay', turnId: uniqueKey('turn'), args: { amount: 5 } };
      let runs = 0;
      const tool = async () => ++runs;
      proxy.dropNextReply({ outageMs: 2_000 });
      const first = await errorOf(idempotency.run(call, tool));
      expect(proxy.dropped).toBe(1);
      // pg fails the claim's retries while the database refuses connections ("did not run,
      // retry"); postgres.js waits for its connection and its retry of the claim meets its own
      // token (acquired): either way the call runs once, and never ends stuck.
      if (first !== undefined) {
        expect(first, String(first)).toSatisfy(StoreUnavailableError.isInstance);
        expect(runs).toBe(0);
      }
      await new Promise((resolve) => setTimeout(resolve, 2_500)); // the outage is over
      expect(await idempotency.run(call, tool)).toMatchObject({ value: 1 });
      expect(runs).toBe(1);
    });

    test('a complete whose connection dropped after the commit, sent again, answers true; another outcome false', async () => {
      const { store, direct, proxy } = await proxied(driver);
      const key = uniqueKey('lost-complete');
      const input = claimInput(key);
      expect((await store.claim(input)).status).toBe('acquired');
      const done = {
        key,
        token: input.token,
        state: 'completed',
        outcome: '{"v":1}',
        ttlMs: 60_000,
      } as const;
      proxy.dropNextReply();
      expect(StoreUnavailableError.isInstance(await errorOf(store.complete(done)))).toBe(true);
      expect(proxy.dropped).toBe(1);
      const committed = await direct.get(key);
      expect(committed).toMatchObject({ state: 'completed', outcome: '{"v":1}' });
      expect(await store.complete(done)).toBe(true);
      expect(await store.complete({ ...done, outcome: '{"v":2}' })).toBe(false);
      expect(await direct.get(key)).toEqual(committed);
    });

    test('a takeover whose connection dropped after the commit, sent again by the new owner, answers true', async () => {
      const { store, direct, proxy } = await proxied(driver);
      const key = uniqueKey('lost-takeover');
      const owner = claimInput(key, 1);
      expect((await store.claim(owner)).status).toBe('acquired');
      await waitFor(
        'the lease to run out',
        async () => (await direct.claim(claimInput(key))).status === 'stale',
      );
      const takeover = {
        key,
        staleToken: owner.token,
        token: randomUUID(),
        leaseMs: 60_000,
        ttlMs: 120_000,
      };
      proxy.dropNextReply();
      expect(StoreUnavailableError.isInstance(await errorOf(store.takeover(takeover)))).toBe(true);
      expect(proxy.dropped).toBe(1);
      const committed = await direct.get(key);
      expect(committed?.token).toBe(takeover.token);
      expect(await store.takeover(takeover)).toBe(true);
      expect(await direct.get(key)).toEqual(committed);
    });
  },
);

/** pg and postgres.js (whose `sql.listen` runs on a connection of its own, outside `max`). */
describe.skipIf(!up).each([['pg'], ['postgres.js']] as const)(
  'postgres store on %s with a pool of max 1',
  (driver) => {
    /** A pool of one connection as a user would make it: no connection timeout. */
    const onePool = () => {
      const applicationName = uniqueName('idt_max1');
      if (driver === 'postgres.js') {
        const small = postgres(DATABASE_URL, {
          max: 1,
          onnotice: () => {},
          connection: { application_name: applicationName },
        });
        cleanup.push(() => small.end({ timeout: 5 }));
        return { small, applicationName };
      }
      const small = new pg.Pool({
        connectionString: DATABASE_URL,
        max: 1,
        application_name: applicationName,
      });
      small.on('error', () => {});
      cleanup.push(() => small.end());
      return { small, applicationName };
    };
    /** The call's outcome, or 'hung' when it did not settle in 20 s (only a hang takes that long). */
    const settle = <T>(promise: Promise<T>) =>
      Promise.race([
        promise.then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        ),
        new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 20_000).unref()),
      ]);

    test('a duplicate waiting behind a holder, and plain calls while a waiter listens, all finish within their bounds', async () => {
      const { small, applicationName } = onePool();
      const store = await freshStore(small);
      const idempotency = createIdempotency({ store });
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started!: () => void;
      const running = new Promise<void>((resolve) => {
        started = resolve;
      });
      let runs = 0;
      const call = { toolName: 'slow', turnId: uniqueKey('turn'), args: {} };
      const tool = async () => {
        runs++;
        started();
        await gate;
        return { held: true };
      };
      const holder = settle(idempotency.run(call, tool));
      await running;

      // A duplicate with a short waitTimeout: InProgressError once it ran out, not a hang.
      const waitTimeout = 300;
      const t0 = performance.now();
      const duplicate = await settle(idempotency.run(call, tool, { waitTimeout }));
      expect(duplicate).not.toBe('hung');
      expect(InProgressError.isInstance((duplicate as { error?: unknown }).error)).toBe(true);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(waitTimeout - TIMER_SLACK_MS);

      // A waiter with a long waitTimeout listens (its own connection, not the pool's)...
      const waiter = settle(idempotency.run(call, tool, { waitTimeout: 60_000 }));
      await waitFor('the waiter to LISTEN', async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'`,
          [applicationName],
        );
        return rows[0].n === 1;
      });
      // ...while plain calls on the one pooled connection go through.
      for (let i = 0; i < 5; i++) {
        const plain = await settle(
          idempotency.run(
            { toolName: 'plain', turnId: uniqueKey('turn'), args: { i } },
            async () => i,
          ),
        );
        expect(plain).toEqual({
          value: expect.objectContaining({ value: i, outcome: 'executed' }),
        });
      }

      release();
      expect(await holder).toEqual({
        value: expect.objectContaining({ outcome: 'executed', value: { held: true } }),
      });
      expect(await waiter).toEqual({
        value: expect.objectContaining({ replayed: true, value: { held: true } }),
      });
      expect(runs).toBe(1);
      // close() ends the store's own LISTEN connection (pg); postgres.js keeps its own connection
      // open until sql.end(), and close() unlistens on it.
      await store.close();
      await waitFor('close() to end the LISTEN connection', async () => {
        const { rows } = await pool.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE '${driver === 'pg' ? '%' : ''}LISTEN%'`,
          [applicationName],
        );
        return rows[0].n === 0;
      });
    });
  },
);

describe.skipIf(!up)('postgres store: rows it did not write', () => {
  test('a finished row without outcome, or a state the store does not know: RecordIntegrityError, the tool never runs', async () => {
    const store = await freshStore();
    // A bad migration dropped the CHECK: a state the store does not know.
    await pool.query(
      `ALTER TABLE ${store.names.qualified} DROP CONSTRAINT IF EXISTS ${store.names.table}_state_check`,
    );
    const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
    const rows: Array<[string, string]> = [
      ['completed without outcome', `state = 'completed', outcome = NULL`],
      ['failed without outcome', `state = 'failed', outcome = NULL`],
      ['an unknown state', `state = 'done', outcome = '{"v":1}'`],
    ];
    for (const [label, set] of rows) {
      const call = { toolName: 't', turnId: uniqueKey('turn'), args: {} };
      const { key } = idempotency.keyOf(call);
      await pool.query(
        `INSERT INTO ${store.names.qualified} (key, state, fingerprint, token, lease_expires_at, expires_at, created_at)
         VALUES ($1, 'in_progress', 'fp', 'tok', 0, 8000000000000, 0)`,
        [key],
      );
      await pool.query(`UPDATE ${store.names.qualified} SET ${set} WHERE key = $1`, [key]);
      for (const op of [() => store.claim(claimInput(key)), () => store.get(key)]) {
        const error = await errorOf(op());
        expect(RecordIntegrityError.isInstance(error), label).toBe(true);
        expect((error as RecordIntegrityError).reason).toBe('corrupt');
      }
      let runs = 0;
      const error = await errorOf(idempotency.run(call, async () => ++runs));
      expect(IdempotencyError.isInstance(error) && error.code, label).toBe('record_integrity');
      expect(runs).toBe(0);
    }
  });
});

describe.skipIf(!up)('a client that cannot answer: refused or bounded, never a hang', () => {
  test('an unconnected pg.Client fails at once (before the fix: it queued the claim forever)', async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    const store = createPostgresStore(client, { schema, table: 'never_connected' });
    const started = performance.now();
    const error = await errorOf(store.claim(claimInput(uniqueKey('k'))));
    expect(error).toMatchObject({ code: 'store_unavailable' });
    expect((error as Error).message).toMatch(/never connected.*client\.connect\(\)/);
    expect(performance.now() - started).toBeLessThan(1_000); // no deadline waited for
  });

  test('a pool that never gets a connection: the store deadline (timeoutMs) ends the wait', async () => {
    // A server that accepts the connection and never answers.
    const { createServer } = await import('node:net');
    const sockets = new Set<import('node:net').Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const stuck = new pg.Pool({ host: '127.0.0.1', port, user: 'root', database: 'test' });
    stuck.on('error', () => {});
    const store = createPostgresStore(stuck, { timeoutMs: 500, notifications: false });
    const started = performance.now();
    const error = await errorOf(store.claim(claimInput(uniqueKey('k'))));
    const ms = performance.now() - started;
    expect(error).toMatchObject({ code: 'store_unavailable' });
    expect((error as Error).message).toMatch(/no answer within 500 ms \(timeoutMs\)/);
    expect(ms).toBeLessThan(30_000);
    for (const socket of sockets) socket.destroy();
    silent.close();
    void stuck.end().catch(() => {});
  });
});
