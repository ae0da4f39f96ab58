/**
 * The store on postgres.js and PGlite, table-driven: the conformance suite (also with
 * notifications and prepared statements off), round trips, NOTIFY wake-ups, the change before
 * the first LISTEN, a lost LISTEN connection, rows the store did not write, hostile strings, an
 * unavailable engine, close(), and the audit log on the same client. The pg clauses are in postgres-store.test.ts and the others.
 *
 * Which clauses run where: postgres.js reaches the shared server, so every clause runs (a second
 * instance is "another process" for NOTIFY). PGlite is one PostgreSQL session inside this
 * process: a second store on the same instance stands in for the other waiter (its NOTIFY
 * reaches the session's own LISTEN); there is no connection to lose (that clause is skipped),
 * and "unavailable" is a closed instance. The cross-process race and crash, the outages and the
 * lost replies run for postgres.js in processes / outage / faults.test.ts and not for PGlite:
 * no other process can open its database, and no network stands between it and the store.
 */
import { randomUUID } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import {
  createIdempotency,
  type IdempotencyEvent,
  InvalidInputError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import {
  runStoreConformance,
  runStoreFuzz,
  TIMER_SLACK_MS,
  uniqueKey,
  waitFor,
} from '@idempotent-tools/testing';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPostgresAuditLog } from './audit-log.js';
import { createPostgresStore, type PostgresStore } from './postgres-store.js';
import { detectDriver } from './resolve-driver.js';
import {
  type DriverCase,
  type OpenedClient,
  pgliteCase,
  postgresJsCase,
  sqlOn,
} from './test-utils/drivers.js';
import { DATABASE_URL, postgresUp, testPool, uniqueName } from './test-utils/pg.js';
import { expectWokenByNotify, isLook, recordStatements } from './test-utils/timing.js';

const admin = testPool({ label: 'drivers_admin', max: 4 });
const up = await postgresUp(admin);

afterAll(async () => {
  await admin.end();
});

const claimInput = (key: string, leaseMs = 60_000) => ({
  key,
  fingerprint: 'fp-a',
  token: randomUUID(),
  leaseMs,
  ttlMs: 120_000,
});

describe('driver detection', () => {
  test('each client is detected; driver names it or throws on a mismatch', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    const sql = postgres(DATABASE_URL);
    const lite = new PGlite();
    try {
      expect([detectDriver(pool), detectDriver(sql), detectDriver(lite)]).toEqual([
        'pg',
        'postgres.js',
        'pglite',
      ]);
      expect(createPostgresStore(sql).driver).toBe('postgres.js');
      expect(createPostgresStore(lite).driver).toBe('pglite');
      expect(createPostgresStore(pool, { driver: 'pg' }).driver).toBe('pg');
      const fieldOf = (make: () => unknown) => {
        try {
          make();
        } catch (error) {
          return InvalidInputError.isInstance(error) ? error.field : 'other';
        }
        return 'none';
      };
      expect([
        fieldOf(() => createPostgresStore(pool, { driver: 'postgres.js' })),
        fieldOf(() => createPostgresStore(sql, { driver: 'pglite' })),
        fieldOf(() => createPostgresStore(lite, { driver: 'nope' as 'pg' })),
        fieldOf(() => createPostgresStore(sql, { listenClient: new pg.Client() })),
        fieldOf(() => createPostgresStore({} as pg.Pool)),
        fieldOf(() =>
          createPostgresStore(postgres(DATABASE_URL, { transform: postgres.camel }), {}),
        ),
      ]).toEqual(['driver', 'driver', 'driver', 'listenClient', 'pool', 'pool']);
    } finally {
      await pool.end();
      await sql.end();
      await lite.close();
    }
  });
});

/** Per driver: whether its engine is here, and the clauses below. */
const cases: Array<[DriverCase, boolean]> = [
  [postgresJsCase, up],
  [pgliteCase, true],
];

describe.each(cases)('store on $name', (driver, available) => {
  let main: OpenedClient;
  const schema = uniqueName('idt_drv');
  let tables = 0;
  const opened: OpenedClient[] = [];

  beforeAll(async () => {
    if (!available) return;
    main = await driver.open({ label: 'drv_main' });
    await sqlOn(main, `CREATE SCHEMA ${schema}`);
  });
  afterAll(async () => {
    if (!available) return;
    for (const o of opened.reverse()) await o.end().catch(() => {});
    await sqlOn(main, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await main.end();
  });

  /** Another client on the same database: a second instance, or PGlite's one session. */
  const another = async (label: string, max = 2): Promise<OpenedClient> => {
    if (!driver.network) return main;
    const o = await driver.open({ label, max });
    opened.push(o);
    return o;
  };

  async function freshStore(
    options: Parameters<typeof createPostgresStore>[1] = {},
    on: OpenedClient = main,
  ): Promise<PostgresStore> {
    const store = createPostgresStore(on.client, { schema, table: `t${tables++}`, ...options });
    expect(store.driver).toBe(driver.name);
    await store.ensureSchema();
    return store;
  }
  async function dropStore(store: PostgresStore): Promise<void> {
    await store.close();
    await sqlOn(main, `DROP TABLE IF EXISTS ${store.names.qualified}`);
  }

  describe.skipIf(!available)('conformance', () => {
    runStoreConformance({
      name: 'conformance',
      describe,
      test,
      expect,
      clock: 'real',
      createStore: ({ timeoutMs }) => freshStore({ timeoutMs }),
      destroyStore: dropStore,
      raw: {
        count: async (store) =>
          Number(
            (await sqlOn(main, `SELECT count(*)::int AS n FROM ${store.names.qualified}`))[0]?.n,
          ),
      },
      corruptRecord: async (store, key) => {
        await sqlOn(
          main,
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
  });

  describe.skipIf(!available)('round trips, wake-ups, rows it did not write', () => {
    test('a replay is one statement, a fresh call two (claim + complete)', async () => {
      const store = await freshStore();
      const sent = recordStatements(main.client);
      try {
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'charge', turnId: randomUUID(), args: { amount: 5 } };
        const before = sent.length;
        const first = await idempotency.run(call, () => ({ id: 'ch_1' }));
        expect(first.replayed).toBe(false);
        expect(sent.length - before).toBe(2);
        const again = await idempotency.run(call, () => ({ id: 'ch_2' }));
        expect(again).toMatchObject({ replayed: true, value: { id: 'ch_1' } });
        expect(sent.length - before).toBe(3);
      } finally {
        await dropStore(store);
      }
    });

    test('a waiter on another client wakes by NOTIFY when a writer completes', async () => {
      const other = await another('drv_other');
      const writer = await freshStore();
      const reader = createPostgresStore(other.client, { schema, table: writer.names.table });
      const sent = recordStatements(other.client);
      try {
        expect(reader.capabilities.notifiesChanges).toBe(true);
        const key = uniqueKey('notify');
        const owner = claimInput(key);
        await writer.claim(owner);
        expect((await reader.claim(claimInput(key))).status).toBe('in_progress');
        await expectWokenByNotify({
          waiter: reader,
          sent,
          key,
          timeoutMs: 300_000, // a hang detector: the wake-up is what is asserted
          change: () =>
            writer.complete({
              key,
              token: owner.token,
              state: 'completed',
              outcome: '1',
              ttlMs: 10_000,
            }),
        });
      } finally {
        await reader.close();
        await dropStore(writer);
      }
    });

    test('a change between the claim and the first LISTEN is not missed', async () => {
      const other = await another('drv_gap');
      const writer = await freshStore();
      const reader = createPostgresStore(other.client, { schema, table: writer.names.table });
      try {
        const key = uniqueKey('gap');
        const owner = claimInput(key);
        await writer.claim(owner);
        expect((await reader.claim(claimInput(key))).status).toBe('in_progress');
        await writer.release(key, owner.token);
        const timeoutMs = 300_000; // a hang detector: the wake-up is what is asserted
        const start = performance.now();
        await reader.waitForChange!(key, timeoutMs);
        expect(performance.now() - start).toBeLessThan(timeoutMs - TIMER_SLACK_MS);
      } finally {
        await reader.close();
        await dropStore(writer);
      }
    });

    test.skipIf(!driver.network)(
      'a killed LISTEN connection wakes waiters, and the next wait listens again',
      async () => {
        const other = await another('drv_listener', 3);
        const writer = await freshStore();
        const reader = createPostgresStore(other.client, { schema, table: writer.names.table });
        const sent = recordStatements(other.client);
        try {
          const key = uniqueKey('killed');
          const owner = claimInput(key);
          await writer.claim(owner);
          const timeoutMs = 300_000; // a hang detector: the wake-up is what is asserted
          const start = performance.now();
          const first = reader.waitForChange!(key, timeoutMs);
          await waitFor('the waiter to listen and look at the record', () => sent.some(isLook));
          expect((await sent.find(isLook)!.reply).rows[0]?.running).toBe(true);
          const { rows } = await admin.query(
            `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE 'LISTEN%'`,
            [other.applicationName],
          );
          expect(rows.map((row) => row.killed)).toEqual([true]);
          await first;
          // Woken by the lost connection (postgres.js listened again: a second onlisten).
          expect(performance.now() - start).toBeLessThan(timeoutMs - TIMER_SLACK_MS);
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
        }
      },
    );

    test('a finished row without outcome, or an unknown state: RecordIntegrityError, the tool never runs', async () => {
      const store = await freshStore();
      try {
        await sqlOn(
          main,
          `ALTER TABLE ${store.names.qualified} DROP CONSTRAINT IF EXISTS ${store.names.table}_state_check`,
        );
        const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
        for (const set of [
          `state = 'completed', outcome = NULL`,
          `state = 'done', outcome = '1'`,
        ]) {
          const call = { toolName: 't', turnId: uniqueKey('turn'), args: {} };
          const { key } = idempotency.keyOf(call);
          await sqlOn(
            main,
            `INSERT INTO ${store.names.qualified} (key, state, fingerprint, token, lease_expires_at, expires_at, created_at)
             VALUES ($1, 'in_progress', 'fp', 'tok', 0, 8000000000000, 0)`,
            [key],
          );
          await sqlOn(main, `UPDATE ${store.names.qualified} SET ${set} WHERE key = $1`, [key]);
          const error = await store.get(key).catch((e: unknown) => e);
          expect(RecordIntegrityError.isInstance(error)).toBe(true);
          let runs = 0;
          const failed = await idempotency.run(call, async () => ++runs).catch((e: unknown) => e);
          expect((failed as { code?: string }).code).toBe('record_integrity');
          expect(runs).toBe(0);
        }
      } finally {
        await dropStore(store);
      }
    });

    test('close() stops listening and leaves the client open', async () => {
      const store = await freshStore();
      try {
        const key = uniqueKey('close');
        const owner = claimInput(key);
        await store.claim(owner);
        const waiting = store.waitForChange!(key, 20_000);
        await waitFor('the waiter to flag the row', async () => {
          const rows = await sqlOn(
            main,
            `SELECT waiting FROM ${store.names.qualified} WHERE key = $1`,
            [key],
          );
          return rows[0]?.waiting === true;
        });
        await store.close();
        await waiting;
        expect((await sqlOn(main, 'SELECT 1 AS one'))[0]?.one).toBe(1);
        if (!driver.network) {
          // The one session: its channels are visible here.
          const rows = await sqlOn(main, 'SELECT count(*)::int AS n FROM pg_listening_channels()');
          expect(rows[0]?.n).toBe(0);
        }
      } finally {
        await dropStore(store);
      }
    });
  });

  describe.skipIf(!available)('hostile strings', () => {
    // PGlite drops a leading U+FEFF from every text it returns, so the store refuses such text
    // on PGlite (InvalidInputError, below), where the executor's fuzz expects it kept: that
    // clause runs on the network clients only; the store's clause (kept or refused) runs on all.
    const lossyBom = driver.name === 'pglite';
    runStoreFuzz({
      name: `store on ${driver.name}`,
      describe,
      test: (name, fn, timeoutMs) =>
        lossyBom && name.startsWith('executor:')
          ? test.skip(`${name} (PGlite: a leading U+FEFF is refused)`, fn)
          : test(name, fn, timeoutMs),
      expect,
      runs: Number(process.env.FUZZ_RUNS) || 200,
      createStore: () => freshStore(),
      destroyStore: dropStore,
    });
  });

  test.skipIf(!available)(
    'the audit log: calls and a settlement written, read and counted',
    async () => {
      const store = await freshStore();
      const audit = createPostgresAuditLog(main.client, { schema, table: `audit${tables++}` });
      try {
        await audit.ensureSchema();
        const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
        const call = { toolName: 'charge', turnId: randomUUID(), args: { n: 1 } };
        await idempotency.run(call, async () => 'ok');
        await idempotency.run(call, async () => 'again');
        const { key } = idempotency.keyOf(call);
        // A settlement as an operator's decision emits it (its operator goes to a jsonb column).
        const settled: IdempotencyEvent = {
          key,
          toolName: 'charge',
          scope: undefined,
          turnId: call.turnId,
          outcome: 'settled',
          store: store.name,
          startedAt: Date.now(),
          endedAt: Date.now(),
          durationMs: 0,
          argsFingerprint: 'fp',
          argsBytes: 2,
          operator: { by: 'ops "1"', reason: 'checked, {done}', action: 'completed' },
        };
        audit.onEvent(settled);
        await audit.flush();
        expect(audit.dropped).toBe(0);
        const { events } = await audit.query({ toolName: 'charge' });
        expect(events.map((e) => e.outcome)).toEqual(['settled', 'replayed', 'executed']);
        expect(events[0]?.operator).toEqual({
          by: 'ops "1"',
          reason: 'checked, {done}',
          action: 'completed',
        });
        expect(events[1]).not.toHaveProperty('operator');
        const rows = await sqlOn(
          main,
          `SELECT jsonb_typeof(operator) AS type FROM ${audit.qualified} WHERE outcome = 'settled'`,
        );
        expect(rows).toEqual([{ type: 'object' }]);
        const stats = await audit.stats({ toolName: 'charge' });
        expect(stats).toMatchObject({ calls: 2, replays: 1 });
        expect(stats.byOutcome.settled).toBe(1);
      } finally {
        await audit.close();
        await sqlOn(main, `DROP TABLE IF EXISTS ${audit.qualified}`);
        await dropStore(store);
      }
    },
  );

  test.skipIf(!available || driver.network)(
    'PGlite: text starting with U+FEFF is refused with InvalidInputError, the tool never runs',
    async () => {
      const store = await freshStore();
      try {
        const idempotency = createIdempotency({ store });
        let runs = 0;
        for (const [call, field] of [
          [{ toolName: '\uFEFFtool', turnId: randomUUID(), args: {} }, 'meta.toolName'],
          [{ toolName: 'tool', turnId: '\uFEFFturn', args: {} }, 'meta.turnId'],
        ] as const) {
          const error = await idempotency.run(call, async () => ++runs).catch((e: unknown) => e);
          expect(InvalidInputError.isInstance(error) && error.field).toBe(field);
        }
        expect(runs).toBe(0);
        const owner = claimInput(uniqueKey('bom'));
        await store.claim(owner);
        const refused = await store
          .complete({ ...owner, state: 'completed', outcome: '\uFEFF1', ttlMs: 10_000 })
          .catch((e: unknown) => e);
        expect(InvalidInputError.isInstance(refused)).toBe(true);
        // Inside the text it round-trips.
        expect(
          await store.complete({ ...owner, state: 'completed', outcome: '1\uFEFF', ttlMs: 10_000 }),
        ).toBe(true);
        expect((await store.get(owner.key))?.outcome).toBe('1\uFEFF');
      } finally {
        await dropStore(store);
      }
    },
  );

  test.skipIf(!available)(
    'an engine that is gone: StoreUnavailableError, fail-open says so',
    async () => {
      let client: OpenedClient;
      if (driver.network) {
        client = await driver.open({ label: 'drv_down', url: 'postgres://root@127.0.0.1:1/test' });
      } else {
        client = await driver.open();
        await client.end(); // a closed PGlite
      }
      const store = createPostgresStore(client.client, { notifications: false });
      let runs = 0;
      const call = { toolName: 'lookup', turnId: randomUUID(), args: {} };
      const error = await createIdempotency({ store })
        .run(call, async () => ++runs)
        .catch((e: unknown) => e);
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect(runs).toBe(0);
      const open = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
      expect(await open.run(call, async () => ++runs)).toMatchObject({
        value: 1,
        outcome: 'unguarded',
      });
      if (driver.network) await client.end();
    },
  );
});
