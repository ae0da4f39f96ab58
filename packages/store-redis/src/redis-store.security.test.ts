import { randomUUID } from 'node:crypto';
import { createIdempotency, StoreUnavailableError } from '@idempotent-tools/core';
import { runStoreFuzz, serviceAvailable } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRedisStore, type RedisClient } from './index.js';
import { DRIVERS, targetOf } from './test-utils/drivers.js';
import { countKeys, dropKeys, testPrefix } from './test-utils/keys.js';

// Issue #10: hostile strings against a real Redis (RESP, glob and hash-tag characters, CRLF,
// NUL, lone surrogates), and fail-open, on every client (DRIVERS). `redis` (ioredis) is the
// admin client of the raw counts.

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
redis.on('error', () => {});
const up = await serviceAvailable({
  name: 'Redis',
  url,
  probe: async () => {
    await redis.connect();
    return redis.ping();
  },
});
const prefixes: string[] = [];
afterAll(async () => {
  if (!up) return;
  for (const prefix of prefixes) await dropKeys(redis, prefix);
  await redis.quit();
});

for (const driver of DRIVERS) {
  let client: RedisClient;
  beforeAll(async () => {
    if (up) client = await driver.connect(targetOf(url));
  });
  afterAll(async () => {
    if (client !== undefined) await driver.close(client);
  });

  runStoreFuzz({
    name: `redis store on ${driver.name}`,
    describe: describe.skipIf(!up),
    test,
    expect,
    runs: Number(process.env.FUZZ_RUNS) || 200,
    createStore: () => {
      const prefix = testPrefix('fuzz');
      prefixes.push(prefix);
      return createRedisStore(client, { prefix });
    },
  });

  describe.skipIf(!up)(`redis store on ${driver.name}: hostile keys stay under the prefix`, () => {
    test('keys with glob, hash-tag and RESP characters touch nothing outside the prefix', async () => {
      const prefix = testPrefix('glob');
      const neighbour = testPrefix('neighbour');
      prefixes.push(prefix, neighbour);
      const store = createRedisStore(client, { prefix });
      const other = createRedisStore(client, { prefix: neighbour });
      await other.claim({ key: 'k', fingerprint: 'f', token: 't', leaseMs: 60_000, ttlMs: 60_000 });
      const keys = ['*', '?', '[a-z]', '}{', `${neighbour}{k}`, '*\r\n$-1\r\n', 'a\u0000b'];
      for (const key of keys) {
        const token = randomUUID();
        await store.claim({ key, fingerprint: 'f', token, leaseMs: 60_000, ttlMs: 60_000 });
        expect(
          await store.complete({ key, token, state: 'completed', outcome: key, ttlMs: 60_000 }),
        ).toBe(true);
      }
      expect(await countKeys(redis, prefix)).toBe(keys.length);
      expect(await countKeys(redis, neighbour)).toBe(1);
      const listed = await store.list?.({ limit: 1000 });
      expect(listed?.records.map((r) => r.key).sort()).toEqual([...keys].sort());
      expect(await store.purgeExpired?.()).toBe(0);
      expect((await other.get('k'))?.token).toBe('t');
      for (const key of keys) expect((await store.get(key))?.outcome).toBe(key);
      await store.close();
      await other.close();
    });
  });

  describe(`redis store on ${driver.name}: store unavailable`, () => {
    test('fail-closed by default; fail-open runs the tool unguarded and says so', async () => {
      // Nothing listens on port 1 (node-redis: never connected): every command fails at once.
      const down = driver.down();
      const store = createRedisStore(down, { prefix: testPrefix('down'), notifications: 'off' });
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
      await driver.close(down);
    });
  });
}
