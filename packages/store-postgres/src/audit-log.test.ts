import { InvalidInputError, StoreUnavailableError } from '@idempotent-tools/core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  auditSchemaSql,
  createIdempotency,
  createPostgresAuditLog,
  createPostgresStore,
  type IdempotencyEvent,
  type PostgresStore,
} from './index.js';
import { DATABASE_URL, postgresUp, testPool, uniqueName } from './test-utils/pg.js';

const pool = testPool({ label: 'audit' });
const up = await postgresUp(pool);
const schema = uniqueName('idt_audit');
let tables = 0;
const SECRET = 'sk_live_never_logged';

beforeAll(async () => {
  if (up) await pool.query(`CREATE SCHEMA ${schema}`);
});
afterAll(async () => {
  if (up) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

async function freshLog(options: Parameters<typeof createPostgresAuditLog>[1] = {}) {
  const audit = createPostgresAuditLog(pool, { schema, table: `a${tables++}`, ...options });
  await audit.ensureSchema();
  return audit;
}

/** A table laid out as 0.1 made it (no operator column), with one old row. */
async function oldTable(): Promise<string> {
  const table = `old${tables++}`;
  await pool.query(`CREATE TABLE ${schema}.${table} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text COLLATE "C" NOT NULL,
    tool_name text NOT NULL, scope text, turn_id text, outcome text NOT NULL, store text NOT NULL,
    started_at bigint NOT NULL, ended_at bigint NOT NULL, duration_ms bigint NOT NULL,
    waited_ms bigint, error_code text, args_fingerprint text NOT NULL, args_bytes bigint NOT NULL,
    result_bytes bigint)`);
  await pool.query(
    `INSERT INTO ${schema}.${table} (key, tool_name, outcome, store, started_at, ended_at,
     duration_ms, args_fingerprint, args_bytes) VALUES ('v1_old', 'charge', 'executed', 'postgres', 1000, 1010, 10, 'fp', 2)`,
  );
  return table;
}

async function columnsOf(table: string): Promise<string[]> {
  const { rows } = await pool.query(
    'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2',
    [schema, table],
  );
  return rows.map((r) => r.column_name as string);
}

/** Until the store (on the database clock) calls the record stale: no timing assumed. */
async function untilStale(store: PostgresStore, key: string): Promise<void> {
  for (;;) {
    const page = await store.list({ state: 'stale', limit: 1000 });
    if (page.records.some((r) => r.key === key)) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function event(i: number, overrides: Partial<IdempotencyEvent> = {}): IdempotencyEvent {
  return {
    key: `v1_key${i}`,
    toolName: 'charge',
    scope: 'acme',
    turnId: `turn-${i}`,
    outcome: 'executed',
    store: 'postgres',
    startedAt: 1_000 + i,
    endedAt: 1_010 + i,
    durationMs: 10,
    argsFingerprint: `fp${i}`,
    argsBytes: 20,
    resultBytes: 30,
    ...overrides,
  };
}

/** An event as an operator's settlement emits it: no result, an operator. */
function settlement(
  i: number,
  operator: NonNullable<IdempotencyEvent['operator']>,
): IdempotencyEvent {
  const { resultBytes: _none, ...rest } = event(i, { outcome: 'settled', operator });
  return rest;
}

describe.skipIf(!up)('createPostgresAuditLog', () => {
  test('records every call of the executor; reads them back newest first; no raw args or results', async () => {
    const store = createPostgresStore(pool, { schema, table: `s${tables++}` });
    await store.ensureSchema();
    const audit = await freshLog();
    const idempotency = createIdempotency({ store, onEvent: audit.onEvent, exposeArgs: true });
    const call = { toolName: 'charge', turnId: 't1', scope: 'acme', args: { card: SECRET } };
    await idempotency.run(call, async () => ({ secret: SECRET }));
    await idempotency.run(call, async () => ({ secret: SECRET }));
    await idempotency
      .run({ ...call, turnId: 't2' }, async () => {
        throw new Error('declined');
      })
      .catch(() => undefined);
    await audit.flush();

    const { events, cursor } = await audit.query();
    expect(cursor).toBeUndefined();
    expect(events.map((e) => e.outcome)).toEqual(['failed', 'replayed', 'executed']);
    const { key, fingerprint } = idempotency.keyOf(call);
    expect(events[2]).toMatchObject({
      key,
      toolName: 'charge',
      scope: 'acme',
      turnId: 't1',
      store: 'postgres',
      argsFingerprint: fingerprint,
      resultBytes: Buffer.byteLength(JSON.stringify({ v: { secret: SECRET } })),
    });
    expect(typeof events[0]?.id).toBe('number');
    expect(events[0]).toMatchObject({ errorCode: 'tool_error', turnId: 't2' });
    const { rows } = await pool.query(`SELECT * FROM ${audit.qualified}`);
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(await audit.stats()).toMatchObject({ calls: 3, replays: 1 });
    await audit.close();
    await store.close();
  });

  test('stats, query filters and paging', async () => {
    const audit = await freshLog({ now: () => 10_000, batchSize: 7 });
    const outcomes = ['executed', 'replayed', 'replayed', 'waited', 'drift', 'failed'] as const;
    outcomes.forEach((outcome, i) => void audit.onEvent(event(i, { outcome })));
    audit.onEvent(event(6, { outcome: 'failed', errorCode: 'replayed_failure' }));
    audit.onEvent(event(7, { toolName: 'deploy', scope: undefined, turnId: undefined }));
    for (let i = 8; i < 25; i++) audit.onEvent(event(i));
    await audit.flush();

    const all = await audit.stats();
    expect(all).toMatchObject({ calls: 25, replays: 4 });
    expect(all.replayRate).toBeCloseTo(4 / 25);
    expect(all.byOutcome).toMatchObject({ executed: 19, replayed: 2, waited: 1, failed: 2 });
    expect(await audit.stats({ toolName: 'deploy' })).toMatchObject({ calls: 1, replays: 0 });
    expect(await audit.stats({ since: 1_012, until: 1_014 })).toMatchObject({
      calls: 2,
      replayRate: 1,
    });
    const deploy = (await audit.query({ toolName: 'deploy' })).events[0];
    expect(deploy?.scope).toBeUndefined();
    expect(deploy?.turnId).toBeUndefined();

    const seen: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await audit.query({ limit: 4, ...(cursor === undefined ? {} : { cursor }) });
      expect(page.events.length).toBeLessThanOrEqual(4);
      seen.push(...page.events.map((e) => e.startedAt - 1_000));
      cursor = page.cursor;
    } while (cursor !== undefined);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));
    expect((await audit.query({ outcome: 'replayed' })).events).toHaveLength(2);
    expect((await audit.query({ key: 'v1_key3' })).events).toHaveLength(1);
    expect((await audit.query({ turnId: 'turn-9' })).events).toHaveLength(1);
    await expect(audit.query({ limit: 1001 })).rejects.toSatisfy(InvalidInputError.isInstance);
  });

  test('retention: old events are invisible and purged', async () => {
    let now = 1_000_000;
    const audit = await freshLog({ retentionMs: 60_000, now: () => now });
    for (let i = 0; i < 10; i++) audit.onEvent(event(i, { endedAt: now - 30_000 }));
    await audit.flush();
    now += 40_000;
    expect((await audit.stats()).calls).toBe(0);
    const count = async () =>
      Number((await pool.query(`SELECT count(*) AS n FROM ${audit.qualified}`)).rows[0].n);
    expect(await count()).toBe(10);
    now += 60_000;
    audit.onEvent(event(99, { endedAt: now }));
    await audit.flush(); // a write sweeps (at most once a minute)
    expect(await count()).toBe(1);
    for (let i = 0; i < 5; i++) audit.onEvent(event(i, { endedAt: now - 120_000 }));
    await audit.flush();
    expect(await audit.purgeExpired()).toBe(5);
    expect(await count()).toBe(1);
  });

  test('a missing table: writes are reported and dropped, reads say to run ensureSchema', async () => {
    const errors: unknown[] = [];
    const audit = createPostgresAuditLog(pool, {
      schema,
      table: 'never_created',
      onError: (e) => errors.push(e),
    });
    audit.onEvent(event(1));
    await audit.flush();
    expect(errors).toHaveLength(1);
    expect(audit.dropped).toBe(1);
    await expect(audit.stats()).rejects.toSatisfy(
      (e) => StoreUnavailableError.isInstance(e) && /ensureSchema/.test(e.message),
    );
  });

  test('a settlement: stored with its operator (jsonb), filtered by outcome; not a call in stats', async () => {
    const store = createPostgresStore(pool, { schema, table: `s${tables++}` });
    await store.ensureSchema();
    const audit = await freshLog();
    const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
    const call = { toolName: 'charge', turnId: 't1', args: { amount: 5 } };
    await idempotency.run(call, async () => 'ok');
    await idempotency.run(call, async () => 'ok'); // replayed
    const stuck = { ...call, turnId: 't2' };
    const { key, fingerprint } = idempotency.keyOf(stuck);
    await store.claim({
      key,
      fingerprint,
      token: 'dead',
      leaseMs: 1,
      ttlMs: 600_000,
      meta: { toolName: 'charge', turnId: 't2' },
    });
    await untilStale(store, key);
    const operator = { by: 'ops@example.com', reason: 'vendor shows ch_9 for this turn' };
    await idempotency.settle(key, { completed: { id: 'ch_9' } }, operator);
    await audit.flush();
    expect(audit.dropped).toBe(0);

    expect((await audit.query({ outcome: 'settled' })).events).toEqual([
      expect.objectContaining({
        key,
        outcome: 'settled',
        turnId: 't2',
        operator: { ...operator, action: 'completed' },
      }),
    ]);
    const all = (await audit.query()).events;
    expect(all.map((e) => e.outcome)).toEqual(['settled', 'replayed', 'executed']);
    expect(all[1]).not.toHaveProperty('operator');
    const { rows } = await pool.query(
      `SELECT operator, jsonb_typeof(operator) AS type FROM ${audit.qualified} WHERE outcome = 'settled'`,
    );
    expect(rows).toEqual([{ operator: { ...operator, action: 'completed' }, type: 'object' }]);

    // Two calls, one replay: the settlement is counted apart, never as a call.
    const stats = await audit.stats();
    expect(stats).toMatchObject({ calls: 2, replays: 1, replayRate: 0.5 });
    expect(stats.byOutcome).toMatchObject({ executed: 1, replayed: 1, settled: 1 });
    await audit.close();
    await store.close();
  });

  test('a table of 0.1 (no operator column) gets it on first use, or from ensureSchema; old rows still read', async () => {
    const first = await oldTable();
    const audit = createPostgresAuditLog(pool, { schema, table: first, now: () => 10_000 });
    const operator = { by: 'ops', reason: 'refund confirmed', action: 'released' as const };
    audit.onEvent(settlement(1, operator));
    await audit.flush();
    expect(audit.dropped).toBe(0);
    expect(await columnsOf(first)).toContain('operator');
    expect((await audit.query()).events.map((e) => [e.key, e.operator])).toEqual([
      ['v1_key1', operator],
      ['v1_old', undefined],
    ]);
    expect(await audit.stats()).toMatchObject({ calls: 1, byOutcome: { settled: 1 } });

    const second = await oldTable();
    await createPostgresAuditLog(pool, { schema, table: second }).ensureSchema();
    expect(await columnsOf(second)).toContain('operator');
    // auditSchemaSql() (for migrations) adds it too, and runs again harmlessly.
    const third = await oldTable();
    await pool.query(auditSchemaSql({ schema, table: third }));
    await pool.query(auditSchemaSql({ schema, table: third }));
    expect(await columnsOf(third)).toContain('operator');
  });

  test('a role that may not alter a 0.1 table: calls still written and read; settlements reported and dropped', async () => {
    const table = await oldTable();
    const role = uniqueName('idt_audit_writer');
    await pool.query(`CREATE ROLE ${role} NOLOGIN`);
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await pool.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
      await pool.query(`GRANT SELECT, INSERT, DELETE ON ${schema}.${table} TO ${role}`);
      await client.query(`SET ROLE ${role}`);
      const errors: Array<{ error: unknown; events: IdempotencyEvent[] }> = [];
      const audit = createPostgresAuditLog(client, {
        schema,
        table,
        now: () => 10_000,
        onError: (error, events) => errors.push({ error, events }),
      });
      const operator = { by: 'ops', reason: 'checked by hand', action: 'completed' as const };
      audit.onEvent(event(1));
      audit.onEvent(event(2, { outcome: 'settled', operator }));
      await audit.flush();
      expect(audit.dropped).toBe(1);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.events.map((e) => e.key)).toEqual(['v1_key2']);
      expect(StoreUnavailableError.isInstance(errors[0]!.error)).toBe(true);
      expect(String((errors[0]!.error as Error).message)).toContain(
        'ADD COLUMN IF NOT EXISTS operator jsonb',
      );
      expect((await audit.query()).events.map((e) => e.key)).toEqual(['v1_key1', 'v1_old']);
      expect(await audit.stats()).toMatchObject({ calls: 2, byOutcome: { settled: 0 } });

      // Once the owner migrates the table, settlements are written again.
      await pool.query(auditSchemaSql({ schema, table }));
      audit.onEvent(event(3, { outcome: 'settled', operator }));
      await audit.flush();
      expect(audit.dropped).toBe(1);
      expect((await audit.query({ outcome: 'settled' })).events[0]?.operator).toEqual(operator);
      await audit.close();
    } finally {
      await client.end();
      await pool.query(`DROP OWNED BY ${role}`);
      await pool.query(`DROP ROLE ${role}`);
    }
  });

  test('concurrent ensureSchema is safe; bad options are InvalidInputError', async () => {
    const table = `a${tables++}`;
    await Promise.all(
      Array.from({ length: 4 }, () =>
        createPostgresAuditLog(pool, { schema, table }).ensureSchema(),
      ),
    );
    for (const options of [{ table: 'A-b' }, { schema: '1x' }, { retentionMs: 0 }]) {
      expect(() => createPostgresAuditLog(pool, options)).toThrow(InvalidInputError);
    }
  });
});
