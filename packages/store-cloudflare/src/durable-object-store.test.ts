import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigurationError,
  createIdempotency,
  InvalidInputError,
  type ListedRecord,
} from '@idempotent-tools/core';
import { waitFor } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { createStore } from './client.js';
import { fnv1a, shardOf } from './shards.js';
import { type ProxyStore, startEngine } from './test-utils/engine.js';

const engine = await startEngine();
afterAll(() => engine.dispose());

const claimInput = (key: string, overrides: Record<string, unknown> = {}) => ({
  key,
  fingerprint: 'fp',
  token: randomUUID(),
  leaseMs: 30_000,
  ttlMs: 60_000,
  ...overrides,
});

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (e: unknown) => e,
  );

/** The shards of `store` that hold at least one row. */
async function shardsWithRows(store: ProxyStore): Promise<number[]> {
  const held: number[] = [];
  for (let shard = 0; shard < store.shards; shard++) {
    const [row] = await engine.sql<{ n: number }>(
      `${store.prefix}${shard}`,
      'SELECT count(*) AS n FROM idempotency_records',
    );
    if ((row?.n ?? 0) > 0) held.push(shard);
  }
  return held;
}

describe('durable object store: shards', () => {
  test('the shard of a key is FNV-1a (32 bits) of its UTF-8 bytes: stable across releases', () => {
    // The published FNV-1a test vectors.
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
    expect(shardOf('foobar', 16)).toBe(0xbf9cf968 % 16);
  });

  test('keys are spread over the shards, each record in the object its hash names', async () => {
    const store = await engine.store({ shards: 4 });
    const keys = Array.from({ length: 40 }, (_, i) => `spread-${i}-${randomUUID()}`);
    for (const key of keys) await store.claim(claimInput(key));
    for (const key of keys) {
      const rows = await engine.sql<{ key: string }>(
        engine.objectOf(store, key),
        'SELECT key FROM idempotency_records WHERE key = ?',
        key,
      );
      expect(rows).toEqual([{ key }]);
    }
    expect(await shardsWithRows(store)).toEqual([0, 1, 2, 3]);
    expect(await engine.count(store)).toBe(keys.length);
  });

  test('list across shards pages every record exactly once; stats sum the shards', async () => {
    const store = await engine.store({ shards: 5 });
    const tool = `list-${randomUUID()}`;
    const keys = Array.from({ length: 37 }, (_, i) => `page-${String(i).padStart(2, '0')}`);
    for (const key of keys) await store.claim(claimInput(key, { meta: { toolName: tool } }));
    expect((await shardsWithRows(store)).length).toBeGreaterThan(1);
    for (const limit of [1, 4, 7, 37, 100]) {
      const seen: ListedRecord[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list({ toolName: tool, limit, ...(cursor ? { cursor } : {}) });
        expect(page.records.length).toBeLessThanOrEqual(limit);
        seen.push(...page.records);
        cursor = page.cursor;
        pages++;
      } while (cursor !== undefined && pages < 1000);
      expect(cursor).toBeUndefined();
      expect(seen.map((r) => r.key).sort()).toEqual(keys);
    }
    const stats = await store.stats({ toolName: tool });
    expect({ ...stats, at: 0 }).toEqual({
      records: 37,
      inProgress: 37,
      stale: 0,
      completed: 0,
      failed: 0,
      at: 0,
    });
  });
});

describe('durable object store: ttl by alarms', () => {
  test('the alarm deletes expired rows with no read of them, and wakes their waiters', async () => {
    const store = await engine.store({ shards: 1 });
    const key = `alarm-${randomUUID()}`;
    const short = claimInput(key, { leaseMs: 100, ttlMs: 200 });
    await store.claim(short);
    const kept = `kept-${randomUUID()}`;
    await store.claim(claimInput(kept, { ttlMs: 3_600_000 }));
    // A waiter of the key that expires: the deletion by the alarm is a change.
    const woken = store.waitForChange(key, 300_000).then(() => true);
    // Only the raw handle looks (no operation of the store could delete the row on a read).
    await waitFor(
      'the alarm to delete the expired row',
      async () => (await engine.count(store)) === 1,
      300_000,
    );
    const rows = await engine.sql<{ key: string }>(
      `${store.prefix}0`,
      'SELECT key FROM idempotency_records',
    );
    expect(rows).toEqual([{ key: kept }]);
    expect(await woken).toBe(true);
  });

  test('expired records are invisible before the alarm deletes them', async () => {
    const store = await engine.store({ shards: 1 });
    const key = `invisible-${randomUUID()}`;
    const far = Date.now() + 3_600_000;
    // A row whose expiry has passed while the alarm is set for later: the reads must skip it.
    await engine.sql(
      `${store.prefix}0`,
      `INSERT INTO idempotency_records (key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, outcome)
       VALUES (?, 'completed', 'fp', 'old', ?, ?, ?, ?, '"old"')`,
      key,
      Date.now() - 2000,
      Date.now() - 1000,
      Date.now() - 3000,
      Date.now() - 2000,
    );
    expect(await store.get(key)).toBeUndefined();
    const claim = await store.claim(claimInput(key, { ttlMs: far - Date.now() }));
    expect(claim.status).toBe('acquired');
  });
});

describe('durable object store: durability', () => {
  test('records survive a reset of the object (evicted, storage kept)', async () => {
    const store = await engine.store({ shards: 2 });
    const key = `evict-${randomUUID()}`;
    const input = claimInput(key);
    await store.claim(input);
    await store.complete({
      key,
      token: input.token,
      state: 'completed',
      outcome: '"kept"',
      ttlMs: 60_000,
    });
    await engine.evict(engine.objectOf(store, key));
    const again = await store.claim(claimInput(key));
    expect(again.status).toBe('completed');
    expect(again.record.outcome).toBe('"kept"');
  });

  test('records survive a restart of workerd (persisted storage)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-cloudflare-'));
    try {
      const options = { prefix: `persist-${randomUUID()}:`, shards: 3 };
      const key = `persist-${randomUUID()}`;
      const first = await startEngine({ persist: dir });
      try {
        const store = await first.store(options);
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'charge', turnId: `turn-${randomUUID()}`, args: { n: 1 } };
        const ran = await idempotency.run(call, async () => ({ charged: key }));
        expect(ran.replayed).toBe(false);
        const input = claimInput(key);
        await store.claim(input);
        await store.complete({
          key,
          token: input.token,
          state: 'failed',
          outcome: '{"e":1}',
          ttlMs: 60_000,
        });
        await first.dispose();
        const second = await startEngine({ persist: dir });
        try {
          const reopened = await second.store(options);
          const replay = await createIdempotency({ store: reopened }).run(call, async () => ({
            charged: 'twice',
          }));
          expect(replay).toMatchObject({ replayed: true, value: { charged: key } });
          const record = await reopened.get(key);
          expect(record).toMatchObject({ state: 'failed', outcome: '{"e":1}', token: input.token });
        } finally {
          await second.dispose();
        }
      } finally {
        await first.dispose().catch(() => undefined);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('durable object store: limits', () => {
  test('an outcome up to maxOutcomeBytes is kept and replayed; a larger one is refused before it is sent', async () => {
    const store = await engine.store({ shards: 1 });
    const max = store.capabilities.maxOutcomeBytes ?? 0;
    expect(max).toBeGreaterThan(1_900_000);
    expect(max).toBeLessThan(2_000_000);
    const key = `big-${randomUUID()}`;
    const input = claimInput(key);
    await store.claim(input);
    const outcome = JSON.stringify('x'.repeat(max - 2));
    expect(
      await store.complete({ key, token: input.token, state: 'completed', outcome, ttlMs: 60_000 }),
    ).toBe(true);
    expect((await store.get(key))?.outcome).toBe(outcome);

    const over = `over-${randomUUID()}`;
    const overInput = claimInput(over);
    await store.claim(overInput);
    const error = await errorOf(
      store.complete({
        key: over,
        token: overInput.token,
        state: 'completed',
        outcome: `${outcome} `,
        ttlMs: 60_000,
      }),
    );
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('outcome');
    expect((error as Error).message).toMatch(/maxResultBytes/);
    expect((await store.get(over))?.state).toBe('in_progress');
  });
});

describe('durable object store: options and setup', () => {
  test('bad options are refused with InvalidInputError or ConfigurationError naming what to fix', async () => {
    const bad: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ shards: 0 }, 'shards', /whole number between 1 and 1024/],
      [{ shards: 1.5 }, 'shards', /whole number/],
      [{ shards: 5000 }, 'shards', /between 1 and 1024/],
      [{ prefix: 42 }, 'prefix', /prefix must be a string/],
      [{ timeoutMs: 5 }, 'timeoutMs', /from 100 to 600000/],
    ];
    for (const [options, field, message] of bad) {
      const error = await errorOf(engine.store(options));
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe(field);
      expect((error as Error).message).toMatch(message);
    }
    const misspelt = await errorOf(engine.store({ shard: 4 } as never));
    expect(ConfigurationError.isInstance(misspelt)).toBe(true);
    expect((misspelt as ConfigurationError).option).toBe('shard');
    expect((misspelt as Error).message).toMatch(/did you mean "shards"/);
  });

  test('a namespace that is not a Durable Object binding is refused with what to pass', () => {
    for (const namespace of [undefined, null, {}, 'IDEMPOTENCY', { get() {} }]) {
      let error: unknown;
      try {
        createStore(namespace as never);
      } catch (e) {
        error = e;
      }
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe('namespace');
      expect((error as Error).message).toMatch(/createDurableObjectStore\(env\.IDEMPOTENCY\)/);
    }
  });

  test('a class without SQLite storage (new_classes) fails every call with a ConfigurationError naming new_sqlite_classes', async () => {
    const kv = await startEngine({ sqlite: false });
    try {
      const store = await kv.store({ shards: 1 });
      for (const operation of [
        () => store.claim(claimInput(`kv-${randomUUID()}`)),
        () => store.get('k'),
        () => store.stats(),
      ]) {
        const error = await errorOf(operation());
        expect(ConfigurationError.isInstance(error)).toBe(true);
        expect((error as ConfigurationError).option).toBe('new_sqlite_classes');
        expect((error as Error).message).toMatch(/new_sqlite_classes/);
      }
    } finally {
      await kv.dispose();
    }
  });
});
