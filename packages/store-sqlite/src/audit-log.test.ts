import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { InvalidInputError, StoreUnavailableError } from '@idempotent-tools/core';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, test } from 'vitest';
import {
  createIdempotency,
  createSqliteAuditLog,
  type IdempotencyEvent,
  openSqliteStore,
} from './index.js';
import { betterTest } from './test-utils/better-sqlite3.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-audit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const file = () => join(dir, `audit-${files++}.db`);

const SECRET = 'sk_live_never_logged';

function event(i: number, overrides: Partial<IdempotencyEvent> = {}): IdempotencyEvent {
  return {
    key: `v1_key${i}`,
    toolName: 'charge',
    scope: 'acme',
    turnId: `turn-${i}`,
    outcome: 'executed',
    store: 'sqlite',
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

describe('createSqliteAuditLog', () => {
  test('records every call of the executor; reads them back newest first; no raw args or results', async () => {
    const store = openSqliteStore(file());
    const audit = createSqliteAuditLog(store.database);
    const idempotency = createIdempotency({ store, onEvent: audit.onEvent, exposeArgs: true });
    const call = { toolName: 'charge', turnId: 't1', scope: 'acme', args: { card: SECRET } };
    await idempotency.run(call, async () => ({ secret: SECRET }));
    await idempotency.run(call, async () => ({ secret: SECRET }));
    await idempotency
      .run({ ...call, turnId: 't2' }, async () => {
        throw new Error('declined');
      })
      .catch(() => undefined);
    expect(audit.pending).toBe(3);
    await audit.flush();
    expect(audit.pending).toBe(0);

    const { events, cursor } = await audit.query();
    expect(cursor).toBeUndefined();
    expect(events.map((e) => e.outcome)).toEqual(['failed', 'replayed', 'executed']);
    const { key, fingerprint } = idempotency.keyOf(call);
    expect(events[2]).toMatchObject({
      key,
      toolName: 'charge',
      scope: 'acme',
      turnId: 't1',
      outcome: 'executed',
      store: 'sqlite',
      argsFingerprint: fingerprint,
      resultBytes: Buffer.byteLength(JSON.stringify({ v: { secret: SECRET } })),
    });
    expect(events[0]).toMatchObject({ errorCode: 'tool_error', turnId: 't2' });
    expect(events[0]?.resultBytes).toBeUndefined();
    expect(events[0]!.id).toBeGreaterThan(events[1]!.id);

    const dump = JSON.stringify(store.database.prepare('SELECT * FROM idempotency_audit').all());
    expect(dump).not.toContain(SECRET);
    await audit.close();
    await store.close();
  });

  test('stats: calls, replays, replay rate and counts by outcome, per tool and time range', async () => {
    const db = new DatabaseSync(':memory:');
    const audit = createSqliteAuditLog(db, { now: () => 10_000 });
    const outcomes = ['executed', 'replayed', 'replayed', 'waited', 'drift', 'failed'] as const;
    outcomes.forEach((outcome, i) => void audit.onEvent(event(i, { outcome })));
    audit.onEvent(event(6, { outcome: 'failed', errorCode: 'replayed_failure' }));
    audit.onEvent(event(7, { outcome: 'executed', toolName: 'deploy' }));
    await audit.flush();

    const all = await audit.stats();
    expect(all).toMatchObject({ calls: 8, replays: 4, replayRate: 0.5 });
    expect(all.byOutcome).toMatchObject({
      executed: 2,
      replayed: 2,
      waited: 1,
      drift: 1,
      failed: 2,
      'store-unavailable': 0,
    });
    expect(await audit.stats({ toolName: 'deploy' })).toMatchObject({ calls: 1, replays: 0 });
    // ended_at is 1010 + i: [1012, 1014) holds events 2 and 3.
    expect(await audit.stats({ since: 1_012, until: 1_014 })).toMatchObject({
      calls: 2,
      replays: 2,
      replayRate: 1,
      since: 1_012,
      until: 1_014,
    });
    expect(await audit.stats({ scope: 'nobody' })).toMatchObject({ calls: 0, replayRate: 0 });
    await audit.close();
  });

  betterTest('query filters and pages with a cursor', async () => {
    const audit = createSqliteAuditLog(new Database(':memory:'), {
      now: () => 10_000,
      batchSize: 7,
    });
    for (let i = 0; i < 25; i++) {
      audit.onEvent(
        event(i, { outcome: i % 5 === 0 ? 'replayed' : 'executed', key: `v1_k${i % 3}` }),
      );
    }
    await audit.flush();
    const seen: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await audit.query({ limit: 4, ...(cursor === undefined ? {} : { cursor }) });
      expect(page.events.length).toBeLessThanOrEqual(4);
      seen.push(...page.events.map((e) => e.startedAt - 1_000));
      cursor = page.cursor;
    } while (cursor !== undefined);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));

    expect((await audit.query({ outcome: 'replayed' })).events.map((e) => e.turnId)).toEqual([
      'turn-20',
      'turn-15',
      'turn-10',
      'turn-5',
      'turn-0',
    ]);
    expect((await audit.query({ key: 'v1_k1', limit: 1000 })).events).toHaveLength(8);
    expect((await audit.query({ turnId: 'turn-3' })).events).toHaveLength(1);
    expect((await audit.query({ since: 1_030 })).events).toHaveLength(5);
    await expect(audit.query({ limit: 0 })).rejects.toSatisfy(InvalidInputError.isInstance);
    await expect(audit.query({ outcome: 'nope' as never })).rejects.toSatisfy(
      InvalidInputError.isInstance,
    );
    await expect(audit.query({ cursor: 'garbage' })).rejects.toSatisfy(
      InvalidInputError.isInstance,
    );
  });

  test('retention: old events are invisible, swept on write and purged', async () => {
    let now = 1_000_000;
    const db = new DatabaseSync(':memory:');
    const audit = createSqliteAuditLog(db, { retentionMs: 60_000, now: () => now });
    for (let i = 0; i < 10; i++) audit.onEvent(event(i, { endedAt: now - 30_000 }));
    await audit.flush();
    now += 40_000; // the 10 events are now 70 s old
    expect((await audit.stats()).calls).toBe(0);
    expect((await audit.query()).events).toHaveLength(0);
    const count = () =>
      Number((db.prepare('SELECT count(*) AS n FROM idempotency_audit').get() as { n: number }).n);
    expect(count()).toBe(10);
    // The next write sweeps (at most once a minute) ...
    now += 60_000;
    audit.onEvent(event(99, { endedAt: now }));
    await audit.flush();
    expect(count()).toBe(1);
    // ... and purgeExpired deletes the rest at once.
    for (let i = 0; i < 5; i++) audit.onEvent(event(i, { endedAt: now - 120_000 }));
    await audit.flush();
    expect(count()).toBe(6);
    expect(await audit.purgeExpired()).toBe(5);
    expect(count()).toBe(1);
  });

  test('a write that fails is reported and dropped; calls are never affected', async () => {
    const db = new DatabaseSync(':memory:');
    const errors: unknown[] = [];
    const audit = createSqliteAuditLog(db, { onError: (e) => errors.push(e) });
    const store = openSqliteStore(file());
    const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
    db.close();
    const result = await idempotency.run({ toolName: 't', turnId: 'x', args: {} }, async () => 1);
    expect(result.value).toBe(1);
    await audit.flush();
    expect(errors).toHaveLength(1);
    expect(StoreUnavailableError.isInstance(errors[0])).toBe(true);
    expect(audit.dropped).toBe(1);
    await expect(audit.stats()).rejects.toSatisfy(StoreUnavailableError.isInstance);
    await store.close();
  });

  test('a settlement: stored with its operator, read back and filtered by outcome; not a call in stats', async () => {
    let now = 1_000_000;
    const store = openSqliteStore(file(), { now: () => now });
    const audit = createSqliteAuditLog(store.database, { now: () => now });
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
      ttlMs: 60_000,
      meta: { toolName: 'charge', turnId: 't2' },
    });
    now += 10; // the lease ran out
    const operator = { by: 'ops@example.com', reason: 'vendor shows ch_9 for this turn' };
    await idempotency.settle(key, { completed: { id: 'ch_9' } }, operator);
    await audit.flush();
    expect(audit.dropped).toBe(0);

    const settled = await audit.query({ outcome: 'settled' });
    expect(settled.events).toEqual([
      expect.objectContaining({
        key,
        outcome: 'settled',
        toolName: 'charge',
        turnId: 't2',
        operator: { ...operator, action: 'completed' },
      }),
    ]);
    const all = (await audit.query()).events;
    expect(all.map((e) => e.outcome)).toEqual(['settled', 'replayed', 'executed']);
    expect(all[1]).not.toHaveProperty('operator');
    const row = store.database
      .prepare("SELECT operator FROM idempotency_audit WHERE outcome = 'settled'")
      .get() as { operator: string };
    expect(JSON.parse(row.operator)).toEqual({ ...operator, action: 'completed' });

    // Two calls, one replay: the settlement is counted apart, never as a call.
    const stats = await audit.stats();
    expect(stats).toMatchObject({ calls: 2, replays: 1, replayRate: 0.5 });
    expect(stats.byOutcome).toMatchObject({ executed: 1, replayed: 1, settled: 1 });
    await audit.close();
    await store.close();
  });

  test('a table of 0.1 (no operator column) gets it on first use; its old rows still read', async () => {
    const path = file();
    const old = new DatabaseSync(path);
    old.exec(`CREATE TABLE idempotency_audit (
      id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, tool_name TEXT NOT NULL,
      scope TEXT, turn_id TEXT, outcome TEXT NOT NULL, store TEXT NOT NULL,
      started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL, duration_ms INTEGER NOT NULL,
      waited_ms INTEGER, error_code TEXT, args_fingerprint TEXT NOT NULL,
      args_bytes INTEGER NOT NULL, result_bytes INTEGER)`);
    old
      .prepare(
        `INSERT INTO idempotency_audit (key, tool_name, outcome, store, started_at, ended_at,
         duration_ms, args_fingerprint, args_bytes) VALUES ('v1_old', 'charge', 'executed', 'sqlite', 1000, 1010, 10, 'fp', 2)`,
      )
      .run();
    old.close();

    const db = new DatabaseSync(path);
    const audit = createSqliteAuditLog(db, { now: () => 10_000 });
    const columns = (
      db.prepare('PRAGMA table_info(idempotency_audit)').all() as Array<{
        name: string;
      }>
    ).map((c) => c.name);
    expect(columns).toContain('operator');
    const operator = { by: 'ops', reason: 'refund confirmed', action: 'released' as const };
    audit.onEvent(settlement(1, operator));
    await audit.flush();
    expect(audit.dropped).toBe(0);
    const events = (await audit.query()).events;
    expect(events.map((e) => [e.key, e.operator])).toEqual([
      ['v1_key1', operator],
      ['v1_old', undefined],
    ]);
    expect(await audit.stats()).toMatchObject({ calls: 1, byOutcome: { settled: 1 } });
    // A second log on the same table finds the column there.
    const again = createSqliteAuditLog(new DatabaseSync(path), { now: () => 10_000 });
    expect((await again.query({ outcome: 'settled' })).events[0]?.operator).toEqual(operator);
    await again.close();
    await audit.close();
    db.close();
  });

  test('bad options are InvalidInputError', () => {
    const db = new DatabaseSync(':memory:');
    for (const options of [
      { table: 'a-b' },
      { table: 'sqlite_x' },
      { retentionMs: 0 },
      { busyTimeoutMs: -1 },
    ]) {
      expect(() => createSqliteAuditLog(db, options)).toThrow(InvalidInputError);
    }
  });
});
