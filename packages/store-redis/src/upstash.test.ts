/**
 * The store on Upstash's REST client (`@upstash/redis`), the real client against a real Redis
 * behind a local endpoint that speaks Upstash's REST protocol (`startUpstashBridge` of
 * @idempotent-tools/testing, test-only): the conformance suite, the requests a call costs, and
 * what differs over HTTP (no pub/sub: waiters poll).
 */
import { createIdempotency, StoreUnavailableError } from '@idempotent-tools/core';
import { runStoreConformance, serviceAvailable, uniqueKey } from '@idempotent-tools/testing';
import { startUpstashBridge, type UpstashBridge } from '@idempotent-tools/testing/upstash';
import { Redis as Upstash } from '@upstash/redis';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRedisStore, type RedisStoreOptions } from './index.js';
import { countKeys, dropKeys, testPrefix } from './test-utils/keys.js';

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

let bridge: UpstashBridge;
const prefixes: string[] = [];
beforeAll(async () => {
  if (!up) return;
  bridge = await startUpstashBridge({
    send: (name, args) => redis.call(name, ...args),
    transaction: async (commands) =>
      ((await redis.multi(commands).exec()) ?? []) as Array<[Error | null, unknown]>,
  });
});
afterAll(async () => {
  if (!up) return;
  await bridge.close();
  for (const prefix of prefixes) await dropKeys(redis, prefix);
  await redis.quit();
});

const client = () => new Upstash({ url: bridge.url, token: bridge.token, enableTelemetry: false });
const storeOn = (options: RedisStoreOptions = {}) => {
  const prefix = options.prefix ?? testPrefix('upstash');
  prefixes.push(prefix);
  return createRedisStore(client(), { ...options, prefix });
};
/**
 * The HTTP requests `fn` sends through the bridge, each as the lowercase names of its commands
 * (one, or a pipeline's: the client pipelines the commands of one tick by itself).
 */
const requestsOf = async (fn: () => Promise<unknown>) => {
  const before = bridge.requests.length;
  await fn();
  return bridge.requests.slice(before).map(({ path, body }) => {
    const commands = (path === '/' ? [body] : body) as unknown[][];
    return commands.map((command) => String(command[0]).toLowerCase());
  });
};

describe.skipIf(!up)('Redis store on @upstash/redis (REST)', () => {
  runStoreConformance({
    name: 'conformance (Upstash REST)',
    describe,
    test,
    expect,
    clock: 'real',
    createStore: ({ timeoutMs }) => storeOn({ timeoutMs }),
    raw: { count: (store) => countKeys(redis, store.prefix) },
    corruptRecord: async (store, key) => {
      await redis.set(`${store.prefix}{${key}}`, 'not a record', 'PX', 120_000);
    },
  });

  test('a fresh call is two requests (claim, complete); a replay is one', async () => {
    const idempotency = createIdempotency({ store: storeOn() });
    const call = { toolName: 'create_ticket', turnId: uniqueKey('turn'), args: { title: 'x' } };
    let runs = 0;
    const tool = async () => ({ ticket: `T-${++runs}` });
    const fresh = await requestsOf(() => idempotency.run(call, tool));
    const replay = await requestsOf(() => idempotency.run(call, tool));
    // One EVALSHA each (and an EVAL after a NOSCRIPT: the first time a script meets this Redis,
    // or after another test's SCRIPT FLUSH), nothing else.
    const evalsha = (requests: string[][]) => requests.filter((r) => r[0] === 'evalsha');
    expect(evalsha(fresh)).toEqual([['evalsha'], ['evalsha']]);
    expect(evalsha(replay)).toEqual([['evalsha']]);
    expect([...fresh, ...replay].flat().filter((c) => c !== 'evalsha' && c !== 'eval')).toEqual([]);
    expect(runs).toBe(1);
  });

  test('no pub/sub over REST: waiters poll, and notifications or a subscriber are refused', async () => {
    const store = storeOn();
    expect(store.capabilities.notifiesChanges).toBe(false);
    expect(store.waitForChange).toBeUndefined();
    expect(() => createRedisStore(client(), { notifications: 'sharded' })).toThrow(
      /leave notifications out/,
    );
    expect(() => createRedisStore(client(), { subscriber: client() as never })).toThrow(
      /pass no subscriber/,
    );
  });

  test('a waiter costs one claim per poll: 2 ms doubling to 100 ms, so at most ~7 + 1 per 100 ms waited', async () => {
    const store = storeOn();
    const holder = createIdempotency({ store });
    const waiter = createIdempotency({ store: storeOn({ prefix: store.prefix }) });
    const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: {} };
    const running = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    const held = holder.run(call, async () => {
      running.resolve();
      await release.promise;
      return { deployed: true };
    });
    await running.promise;
    const started = performance.now();
    let waitedMs = 0;
    const requests = await requestsOf(async () => {
      const waited = waiter.run(call, () => {
        throw new Error('the waiter must not run the tool');
      });
      setTimeout(() => release.resolve(), 400);
      const result = await waited;
      waitedMs = performance.now() - started;
      expect(result).toMatchObject({ outcome: 'waited', value: { deployed: true } });
    });
    await held;
    const claims = requests.flat().filter((c) => c === 'evalsha');
    // Timers only ever fire late: a loaded machine makes fewer polls, never more.
    const polls = claims.length - 1;
    expect(polls).toBeGreaterThanOrEqual(1);
    expect(polls).toBeLessThanOrEqual(7 + Math.ceil(waitedMs / 100) + 1);
  });

  test('the endpoint down: StoreUnavailableError naming what to check, and the tool does not run', async () => {
    const store = createRedisStore(
      new Upstash({ url: 'http://127.0.0.1:1', token: 't', enableTelemetry: false, retry: false }),
      { prefix: testPrefix('upstash-down') },
    );
    const idempotency = createIdempotency({ store });
    let runs = 0;
    const error = await idempotency
      .run({ toolName: 't', turnId: uniqueKey('turn'), args: {} }, async () => ++runs)
      .catch((e: unknown) => e);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/check the client url and token/);
    expect(runs).toBe(0);
  });
});
