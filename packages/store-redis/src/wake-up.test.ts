import { createIdempotency } from '@idempotent-tools/core';
import { serviceAvailable, sleep, uniqueKey } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { createRedisStore } from './index.js';
import { dropKeys, testPrefix } from './test-utils/keys.js';

/**
 * How soon a caller waiting in another connection (another executor, as in another process)
 * gets the outcome once the running call stored it: pub/sub vs the executor's adaptive polling
 * (2 ms doubling to 100 ms, what a store without notifications gets).
 */
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

const SAMPLES = 30;

/** Milliseconds from the holder's `complete` returning to the waiter's replay, per sample. */
async function measure(notifications: 'sharded' | 'classic' | 'off'): Promise<number[]> {
  const prefix = testPrefix(`wake-${notifications}`);
  prefixes.push(prefix);
  const holderClient = redis.duplicate();
  const waiterClient = redis.duplicate();
  const holderStore = createRedisStore(holderClient, { prefix, notifications });
  const waiterStore = createRedisStore(waiterClient, { prefix, notifications });
  const holder = createIdempotency({ store: holderStore });
  const waiter = createIdempotency({ store: waiterStore });
  try {
    return await Promise.all(
      Array.from({ length: SAMPLES }, async (_, i) => {
        const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: { i } };
        // Hold the call 300-800 ms, so the waiter is at a random point of its poll cycle.
        const hold = 300 + ((i * 500) / SAMPLES + Math.random() * 17);
        const held = holder.run(call, async () => {
          await sleep(hold);
          return { i };
        });
        await sleep(30);
        const waited = waiter.run(call, () => {
          throw new Error('the waiter must not run the tool');
        });
        const heldAt = await held.then(() => performance.now());
        const result = await waited;
        const wokeAt = performance.now();
        expect(result).toMatchObject({ replayed: true, outcome: 'waited', value: { i } });
        return Math.max(0, wokeAt - heldAt);
      }),
    );
  } finally {
    await holderStore.close();
    await waiterStore.close();
    holderClient.disconnect();
    waiterClient.disconnect();
  }
}

const stats = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const round = (n: number) => Math.round(n * 10) / 10;
  return { p50: round(at(0.5)), p95: round(at(0.95)), max: round(sorted.at(-1)!) };
};

describe.skipIf(!up)('wake-up latency of a waiter in another connection', () => {
  test('pub/sub wakes waiters sooner than adaptive polling', async () => {
    const sharded = stats(await measure('sharded'));
    const classic = stats(await measure('classic'));
    const polling = stats(await measure('off'));
    console.info(
      `[store-redis] complete -> waiter in another connection has the outcome (ms, ${SAMPLES} samples each): sharded pub/sub ${JSON.stringify(sharded)}, classic pub/sub ${JSON.stringify(classic)}, adaptive polling 2-100 ms ${JSON.stringify(polling)}`,
    );
    expect(sharded.p50).toBeLessThan(polling.p50);
    expect(classic.p50).toBeLessThan(polling.p50);
  }, 30_000);
});
