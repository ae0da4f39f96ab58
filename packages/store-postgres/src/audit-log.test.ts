import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createIdempotency,
  createPostgresAuditLog,
  createPostgresStore,
  type IdempotencyEvent,
  InvalidInputError,
  StoreUnavailableError,
} from './index.js';
import { postgresUp, testPool, uniqueName } from './test-utils/pg.js';

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
