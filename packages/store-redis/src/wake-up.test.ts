import { createIdempotency } from '@idempotent-tools/core';
import { serviceAvailable, sleep, TIMER_SLACK_MS, uniqueKey } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { createRedisStore } from './index.js';
import { DRIVERS, type TestDriver, targetOf } from './test-utils/drivers.js';
import { dropKeys, testPrefix } from './test-utils/keys.js';

/**
 * How a caller waiting in another connection (another executor, as in another process) learns
 * that the running call stored its outcome: with pub/sub the store's message wakes it, without
 * (what a store without notifications gets) the executor polls adaptively (2 ms doubling to
 * 100 ms). The verdict counts the waiter's claims (one per wake-up); the latencies are logged.
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

interface Sample {
  /** ms from the holder's `complete` returning to the waiter's replay (logged). */
  wokeMs: number;
  /** ms the waiter's `run` took in all. */
  waitedMs: number;
  /** Claims the waiter's store made for the call: the first answer, then one per wake-up. */
  claims: number;
}

async function measure(
  driver: TestDriver,
  notifications: 'sharded' | 'classic' | 'off',
): Promise<Sample[]> {
  const prefix = testPrefix(`wake-${notifications}`);
  prefixes.push(prefix);
  const holderClient = await driver.connect(targetOf(url));
  const waiterClient = await driver.connect(targetOf(url));
  // No maxWaitMs fallback within the test: only the push (or the executor's timers) wakes.
  const options = { prefix, notifications, maxWaitMs: 60_000 };
  const holderStore = createRedisStore(holderClient, options);
  const waiterStore = createRedisStore(waiterClient, options);
  const claims = new Map<string, number>();
  const inProgress = new Map<string, PromiseWithResolvers<void>>();
  const seen = (key: string) => {
    let signal = inProgress.get(key);
    if (signal === undefined) {
      signal = Promise.withResolvers<void>();
      inProgress.set(key, signal);
    }
    return signal;
  };
  const claim = waiterStore.claim.bind(waiterStore);
  waiterStore.claim = async (input) => {
    claims.set(input.key, (claims.get(input.key) ?? 0) + 1);
    const result = await claim(input);
    if (result.status === 'in_progress') seen(input.key).resolve();
    return result;
  };
  const holder = createIdempotency({ store: holderStore });
  const waiter = createIdempotency({ store: waiterStore });
  try {
    return await Promise.all(
      Array.from({ length: SAMPLES }, async (_, i): Promise<Sample> => {
        const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: { i } };
        const { key } = waiter.keyOf(call);
        // The waiter starts once the tool runs (the holder has the claim); the tool holds the
        // call 300-800 ms after the waiter saw it running, so the waiter is at a random point
        // of its poll cycle. No step depends on how fast the machine is.
        const hold = 300 + ((i * 500) / SAMPLES + Math.random() * 17);
        const running = Promise.withResolvers<void>();
        const held = holder
          .run(call, async () => {
            running.resolve();
            await seen(key).promise;
            await sleep(hold);
            return { i };
          })
          .then(() => performance.now());
        await running.promise;
        const waitStarted = performance.now();
        const waited = waiter
          .run(call, () => {
            throw new Error('the waiter must not run the tool');
          })
          .then((result) => ({ result, at: performance.now() }));
        const [heldAt, { result, at: wokeAt }] = await Promise.all([held, waited]);
        expect(result).toMatchObject({ replayed: true, outcome: 'waited', value: { i } });
        return {
          wokeMs: Math.max(0, wokeAt - heldAt),
          waitedMs: wokeAt - waitStarted,
          claims: claims.get(key) ?? 0,
        };
      }),
    );
  } finally {
    await holderStore.close();
    await waiterStore.close();
    await driver.close(holderClient);
    await driver.close(waiterClient);
  }
}

const stats = (times: number[]) => {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const round = (n: number) => Math.round(n * 10) / 10;
  return { p50: round(at(0.5)), p95: round(at(0.95)), max: round(sorted.at(-1)!) };
};

/** The executor's poll intervals without notifications: 2 ms doubling to 100 ms. */
const pollMs = (n: number) => Math.min(2 ** n, 100);

for (const driver of DRIVERS) {
  describe.skipIf(!up)(`wake-up of a waiter in another connection (${driver.name})`, () => {
    test('pub/sub wakes waiters with its message (no polls); without it the waiter polls, 2 ms doubling to 100 ms', async () => {
      const sharded = await measure(driver, 'sharded');
      const classic = await measure(driver, 'classic');
      const polling = await measure(driver, 'off');
      const latency = (samples: Sample[]) => JSON.stringify(stats(samples.map((s) => s.wokeMs)));
      const claimCounts = (samples: Sample[]) =>
        JSON.stringify(stats(samples.map((s) => s.claims)));
      console.info(
        `[store-redis] ${driver.name}: complete -> waiter in another connection has the outcome (ms, ${SAMPLES} samples each): sharded pub/sub ${latency(sharded)}, classic pub/sub ${latency(classic)}, adaptive polling 2-100 ms ${latency(polling)}; waiter claims: pub/sub ${claimCounts(sharded)}, polling ${claimCounts(polling)}`,
      );
      // Pub/sub: the first answer, at most one look after the executor's capped first wait
      // (50 ms), then the one after the message. However long the call was held: no polling.
      // The message woke it, not a timer: the next one was the 30 s lease.
      for (const sample of [...sharded, ...classic]) {
        expect(sample.claims).toBeGreaterThanOrEqual(2);
        expect(sample.claims).toBeLessThanOrEqual(3);
        expect(sample.waitedMs).toBeLessThan(30_000 - TIMER_SLACK_MS);
      }
      // Polling: at least one poll, and never sooner than the schedule (each timer waits at least
      // its interval, to the millisecond), so a poll count the waited time cannot hold is a spin.
      for (const sample of polling) {
        expect(sample.claims).toBeGreaterThanOrEqual(2);
        let schedule = 0;
        for (let n = 1; n < sample.claims; n++) schedule += pollMs(n) - 1;
        expect(schedule).toBeLessThanOrEqual(sample.waitedMs);
      }
    });
  });
}
