import { randomUUID } from 'node:crypto';
import {
  createIdempotency,
  InvalidInputError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import {
  inWindow,
  runStoreConformance,
  serviceAvailable,
  sleep,
  TIMER_SLACK_MS,
  uniqueKey,
  waitFor,
} from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { createClient, RESP_TYPES } from 'redis';
import { createClient as createClient5 } from 'redis5';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createRedisStore,
  type RedisClient,
  type RedisStore,
  type RedisStoreOptions,
} from './index.js';
import { DRIVERS, targetOf } from './test-utils/drivers.js';
import { countKeys, dropKeys, testPrefix } from './test-utils/keys.js';
import { expectWokenByPush, shardSubscribers } from './test-utils/timing.js';

// `redis` (ioredis) is the tests' admin client: raw reads and writes, counts, cleanup. Each store
// under test runs on the client of its driver (DRIVERS: ioredis, iovalkey, node-redis 6 and 5).
const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const target = targetOf(url);
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

/** A store on `client` with a prefix of its own (dropped after the run). */
function storeOn(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  const prefix = options.prefix ?? testPrefix('store');
  prefixes.push(prefix);
  return createRedisStore(client, { ...options, prefix });
}
const newStore = (options: RedisStoreOptions = {}) => storeOn(redis, options);

const claimInput = (key: string, token: string = randomUUID()) => ({
  key,
  fingerprint: 'fp',
  token,
  leaseMs: 30_000,
  ttlMs: 60_000,
});

describe.skipIf(!up)('redis store: options', () => {
  test('defaults: prefix idem:, sharded notifications, not durable', () => {
    const store = createRedisStore(redis);
    expect(store.prefix).toBe('idem:');
    expect(store.name).toBe('redis');
    expect(store.capabilities).toEqual({ notifiesChanges: true, durable: false });
    expect(typeof store.waitForChange).toBe('function');
  });

  test('durable and notifications off are declared in capabilities', () => {
    const store = newStore({ durable: true, notifications: 'off' });
    expect(store.capabilities).toEqual({ notifiesChanges: false, durable: true });
    expect(store.waitForChange).toBeUndefined();
  });

  test.each([
    ['prefix', { prefix: '' }],
    ['prefix', { prefix: 'a{b}:' }],
    ['prefix', { prefix: 'tab\t' }],
    ['prefix', { prefix: 'x'.repeat(101) }],
    ['notifications', { notifications: 'always' }],
    ['maxWaitMs', { maxWaitMs: 0 }],
    ['maxWaitMs', { maxWaitMs: 1.5 }],
  ])('rejects a bad %s', (field, options) => {
    let error: unknown;
    try {
      createRedisStore(redis, options as RedisStoreOptions);
    } catch (e) {
      error = e;
    }
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe(field);
  });

  test('rejects something that is not a Redis client, naming the clients it takes', () => {
    for (const bad of [{}, null, 'redis://127.0.0.1:6379', { sendCommand() {} }]) {
      let error: unknown;
      try {
        createRedisStore(bad as unknown as Redis);
      } catch (e) {
        error = e;
      }
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as InvalidInputError).field).toBe('redis');
      expect((error as Error).message).toMatch(/ioredis or iovalkey .* node-redis/);
    }
  });

  test('recognises a node-redis client (not yet connected: nothing is sent at wrap time)', () => {
    const client = createClient({ url });
    expect(createRedisStore(client).capabilities.notifiesChanges).toBe(true);
  });

  test('rejects a subscriber of another client family', () => {
    let error: unknown;
    try {
      createRedisStore(redis, { subscriber: createClient({ url }) });
    } catch (e) {
      error = e;
    }
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('subscriber');
  });
});

for (const driver of DRIVERS) {
  describe.skipIf(!up)(`redis store on ${driver.name}`, () => {
    let client: RedisClient;
    beforeAll(async () => {
      client = await driver.connect(target);
    });
    afterAll(async () => {
      if (client !== undefined) await driver.close(client);
    });

    runStoreConformance({
      name: 'conformance (single node)',
      describe,
      test,
      expect,
      clock: 'real',
      createStore: ({ timeoutMs }) => storeOn(client, { timeoutMs }),
      raw: { count: (store) => countKeys(redis, store.prefix) },
      corruptRecord: async (store, key) => {
        await redis.set(`${store.prefix}{${key}}`, 'not a record', 'PX', 120_000);
      },
    });

    describe('layout and round trips', () => {
      test('a record is one string at <prefix>{<key>} whose Redis TTL is its expiresAt', async () => {
        const store = storeOn(client);
        const key = uniqueKey('layout');
        const owner = claimInput(key);
        await store.claim({ ...owner, meta: { toolName: 'charge', scope: 's', turnId: 't' } });
        await store.complete({
          key,
          token: owner.token,
          state: 'completed',
          outcome: '"ok"\n\tü',
          ttlMs: 60_000,
        });
        const raw = `${store.prefix}{${key}}`;
        expect(await redis.type(raw)).toBe('string');
        const value = (await redis.get(raw))!;
        const [header, outcome] = [
          value.slice(0, value.indexOf('\n')),
          value.slice(value.indexOf('\n') + 1),
        ];
        const [state, lease, expires, created, completed, token, fingerprint, meta] =
          header.split('\t');
        expect({ state, token, fingerprint, outcome }).toEqual({
          state: 'C',
          token: owner.token,
          fingerprint: 'fp',
          outcome: '"ok"\n\tü',
        });
        expect(JSON.parse(meta!)).toEqual({ toolName: 'charge', scope: 's', turnId: 't' });
        expect(Number(lease)).toBeGreaterThanOrEqual(Number(created));
        const pexpiretime = Number(await redis.call('PEXPIRETIME', raw));
        expect(pexpiretime).toBe(Number(expires));
        expect(Number(expires) - Number(completed)).toBe(60_000);
      });

      test('tokens and fingerprints with tabs, newlines and % round-trip', async () => {
        const store = storeOn(client);
        const key = uniqueKey('escape');
        const awkward = { ...claimInput(key, 'to%09k\ten\n%'), fingerprint: 'f\tp\n%0A' };
        const acquired = await store.claim(awkward);
        expect(acquired.status).toBe('acquired');
        expect(await store.get(key)).toEqual(acquired.record);
        const second = await store.claim({ ...awkward, token: 'other' });
        expect(second).toMatchObject({ status: 'in_progress', record: { token: awkward.token } });
        expect(await store.renew(key, awkward.token, 60_000)).toBe(true);
        expect(
          await store.complete({
            key,
            token: awkward.token,
            state: 'failed',
            outcome: 'x',
            ttlMs: 60_000,
          }),
        ).toBe(true);
        expect(await store.claim({ ...awkward, token: 'third' })).toMatchObject({
          status: 'completed',
          record: {
            state: 'failed',
            token: awkward.token,
            fingerprint: awkward.fingerprint,
            outcome: 'x',
          },
        });
        expect((await store.claim({ ...awkward, fingerprint: 'fp' })).status).toBe('drift');
      });

      test('a replay is one round trip, a fresh call two (claim + complete)', async () => {
        const own = await driver.connect(target);
        const sent = driver.recordCommands(own);
        try {
          const store = storeOn(own);
          const idempotency = createIdempotency({ store });
          const call = (turnId: string) => ({ toolName: 'charge', turnId, args: { amount: 5 } });
          await idempotency.run(call('warm-up'), () => 'warm'); // caches the scripts (EVAL once)
          sent.length = 0;

          const turnId = uniqueKey('turn');
          const fresh = await idempotency.run(call(turnId), () => ({ id: 'ch_1' }));
          expect(fresh.replayed).toBe(false);
          expect(sent).toEqual(['evalsha', 'evalsha']);
          sent.length = 0;

          const replay = await idempotency.run(call(turnId), () => ({ id: 'ch_2' }));
          expect(replay).toMatchObject({ replayed: true, value: { id: 'ch_1' } });
          expect(sent).toEqual(['evalsha']);
        } finally {
          await driver.close(own);
        }
      });

      test('concurrent claims of a finished key share one round trip; of a free key they do not', async () => {
        const own = await driver.connect(target);
        const sent = driver.recordCommands(own);
        try {
          const store = storeOn(own);
          const key = uniqueKey('coalesce');
          const owner = claimInput(key);
          await store.claim(owner);
          await store.complete({
            key,
            token: owner.token,
            state: 'completed',
            outcome: '7',
            ttlMs: 60_000,
          });
          sent.length = 0;
          const replays = await Promise.all(
            Array.from({ length: 50 }, (_, i) =>
              store.claim({ ...claimInput(key), fingerprint: i === 7 ? 'other' : 'fp' }),
            ),
          );
          expect(sent).toEqual(['evalsha']);
          expect(replays.filter((r) => r.status === 'completed')).toHaveLength(49);
          expect(replays[7]).toMatchObject({ status: 'drift', record: { outcome: '7' } });

          sent.length = 0;
          const free = uniqueKey('coalesce-free');
          const racers = await Promise.all(
            Array.from({ length: 20 }, () => store.claim(claimInput(free))),
          );
          expect(racers.filter((r) => r.status === 'acquired')).toHaveLength(1);
          expect(racers.filter((r) => r.status === 'in_progress')).toHaveLength(19);
          expect(sent).toHaveLength(20);
        } finally {
          await driver.close(own);
        }
      });

      test('scripts are re-sent after SCRIPT FLUSH (NOSCRIPT falls back to EVAL)', async () => {
        const own = await driver.connect(target);
        const sent = driver.recordCommands(own);
        try {
          const store = storeOn(own);
          const key = uniqueKey('noscript');
          await store.claim(claimInput(key));
          await redis.script('FLUSH');
          sent.length = 0;
          expect((await store.claim(claimInput(key))).status).toBe('in_progress');
          expect(sent).toEqual(['evalsha', 'eval']);
          sent.length = 0;
          expect((await store.claim(claimInput(key))).status).toBe('in_progress');
          expect(sent).toEqual(['evalsha']);
        } finally {
          await driver.close(own);
        }
      });

      test.runIf(driver.family === 'ioredis')(
        'works with a client keyPrefix (records at keyPrefix + prefix, pub/sub still wakes)',
        async () => {
          const keyPrefix = `${uniqueKey('kp')}:`;
          const client = await driver.connect(target, { keyPrefix });
          const prefix = testPrefix('kp');
          prefixes.push(`${keyPrefix}${prefix}`);
          const maxWaitMs = 20_000;
          const store = createRedisStore(client, { prefix, maxWaitMs });
          const looks = driver.recordSettledLooks(client);
          try {
            const key = uniqueKey('kp');
            const owner = claimInput(key);
            await store.claim(owner);
            expect(await redis.exists(`${keyPrefix}${prefix}{${key}}`)).toBe(1);
            await expectWokenByPush({
              waiter: store,
              looks,
              key,
              maxWaitMs,
              change: () =>
                store.complete({
                  key,
                  token: owner.token,
                  state: 'completed',
                  outcome: '1',
                  ttlMs: 100,
                }),
            });
            await sleep(150); // past the 100 ms ttl: Redis expired the record
            await store.claim(claimInput(`${key}-2`, 'x'));
            expect(await countKeys(redis, `${keyPrefix}${prefix}`)).toBe(1);
            // purgeExpired strips the client's keyPrefix before running its script.
            expect(await store.purgeExpired()).toBe(0);
          } finally {
            await store.close();
            await driver.close(client);
          }
        },
      );

      test('purgeExpired deletes expired records whose Redis TTL was removed, restores a lost TTL', async () => {
        await inWindow(async (window) => {
          const store = storeOn(client);
          const expired = uniqueKey('persist-expired');
          const live = uniqueKey('persist-live');
          const ttlMs = window.ms(100);
          await store.claim({ ...claimInput(expired), leaseMs: ttlMs / 2, ttlMs });
          await store.claim(claimInput(live));
          // PERSIST must reach the short-lived record before Redis expires it.
          const persisted = await redis.persist(`${store.prefix}{${expired}}`);
          window.within(
            persisted === 1,
            `the ${ttlMs} ms record expired before PERSIST reached it`,
          );
          expect(await redis.persist(`${store.prefix}{${live}}`)).toBe(1);
          await sleep(ttlMs * 1.5);
          expect(await store.get(expired)).toBeUndefined(); // invisible already
          expect(await countKeys(redis, store.prefix)).toBe(2);
          expect(await store.purgeExpired()).toBe(1);
          expect(await countKeys(redis, store.prefix)).toBe(1);
          // The lost TTL is the record's own expiresAt again (whatever time has passed since).
          const record = await store.get(live);
          expect(record).toBeDefined();
          expect(Number(await redis.call('PEXPIRETIME', `${store.prefix}{${live}}`))).toBe(
            record!.expiresAt,
          );
          expect(await store.purgeExpired()).toBe(0);
        });
      });

      test('a value the store cannot read is a RecordIntegrityError (corrupt), never store_unavailable: fail-open does not run the tool', async () => {
        const store = storeOn(client);
        const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
        const corrupt: Array<[string, (raw: string) => Promise<unknown>]> = [
          ['garbage', (raw) => redis.set(raw, 'not a record')],
          ['a cut header', (raw) => redis.set(raw, 'P\tnot a record')],
          [
            'a finished header with letters for times',
            (raw) => redis.set(raw, 'C\tx\ty\tz\tw\ttok\tfp\t\n{}'),
          ],
          [
            'meta that is not JSON',
            (raw) => redis.set(raw, 'C\t1\t9999999999999\t1\t1\ttok\tfp\t{oops\n{}'),
          ],
          ['a hash', (raw) => redis.hset(raw, 'state', 'completed')],
        ];
        for (const [label, write] of corrupt) {
          const key = uniqueKey('corrupt');
          const raw = `${store.prefix}{${key}}`;
          await write(raw);
          for (const op of [() => store.claim(claimInput(key)), () => store.get(key)]) {
            const error = await op().then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(RecordIntegrityError.isInstance(error), label).toBe(true);
            expect((error as RecordIntegrityError).reason).toBe('corrupt');
            expect((error as Error).message).toContain(raw);
          }
          // Through the executor with fail-open: the call fails, the tool never runs.
          let runs = 0;
          const call = { toolName: 't', turnId: uniqueKey('turn'), args: {} };
          const key2 = idempotency.keyOf(call).key;
          await write(`${store.prefix}{${key2}}`);
          const error = await idempotency
            .run(call, () => ++runs)
            .then(
              () => undefined,
              (e: unknown) => e,
            );
          expect(RecordIntegrityError.isInstance(error), label).toBe(true);
          expect(runs).toBe(0);
          await redis.del(`${store.prefix}{${key2}}`);
        }
      });
    });

    describe('notifications', () => {
      /**
       * Claim `key` on one store, wait on another (its own connections), complete: the message wakes
       * the waiter (`expectWokenByPush`). Returns the ms from complete to the wake-up.
       */
      async function wakeAfterComplete(options: RedisStoreOptions & { maxWaitMs: number }) {
        const owner = storeOn(client, options);
        const other = await driver.connect(target);
        const waiter = createRedisStore(other, { ...options, prefix: owner.prefix });
        const looks = driver.recordSettledLooks(other);
        try {
          const key = uniqueKey('wake');
          const input = claimInput(key);
          await owner.claim(input);
          return await expectWokenByPush({
            waiter,
            looks,
            key,
            maxWaitMs: options.maxWaitMs,
            change: () =>
              owner.complete({
                key,
                token: input.token,
                state: 'completed',
                outcome: '1',
                ttlMs: 1000,
              }),
          });
        } finally {
          await waiter.close();
          await owner.close();
          await driver.close(other);
        }
      }

      test('sharded (SPUBLISH/SSUBSCRIBE) wakes a waiter on another connection', async () => {
        const ms = await wakeAfterComplete({ notifications: 'sharded', maxWaitMs: 20_000 });
        console.info(
          `[store-redis] sharded pub/sub: complete -> waiter woken in ${ms.toFixed(1)} ms`,
        );
      });

      test('classic (PUBLISH/SUBSCRIBE) wakes a waiter on another connection', async () => {
        const ms = await wakeAfterComplete({ notifications: 'classic', maxWaitMs: 20_000 });
        console.info(
          `[store-redis] classic pub/sub: complete -> waiter woken in ${ms.toFixed(1)} ms`,
        );
      });

      test('a change made before the subscription is live is not missed', async () => {
        const other = await driver.connect(target);
        const maxWaitMs = 20_000;
        const store = storeOn(other, { maxWaitMs });
        const looks = driver.recordSettledLooks(other);
        try {
          const key = uniqueKey('early');
          const input = claimInput(key);
          await store.claim(input);
          await store.complete({
            key,
            token: input.token,
            state: 'completed',
            outcome: '1',
            ttlMs: 60_000,
          });
          const start = performance.now();
          await store.waitForChange!(key, maxWaitMs); // nothing is published any more
          // The look after subscribing saw it finished and ended the wait, not the timer.
          expect(performance.now() - start).toBeLessThan(maxWaitMs - TIMER_SLACK_MS);
          expect(looks).toHaveLength(1);
          expect(await looks[0]).toBe('C');
        } finally {
          await store.close();
          await driver.close(other);
        }
      });

      test('a lost message costs at most maxWaitMs', async () => {
        const other = await driver.connect(target);
        const store = storeOn(other, { maxWaitMs: 200 });
        const looks = driver.recordSettledLooks(other);
        try {
          const key = uniqueKey('lost');
          await store.claim(claimInput(key));
          const timeoutMs = 300_000; // a hang detector: the poll ending the wait is what is asserted
          const start = performance.now();
          await store.waitForChange!(key, timeoutMs); // nothing is published
          const elapsed = performance.now() - start;
          console.info(
            `[store-redis] a wait with no message ended after ${Math.round(elapsed)} ms`,
          );
          // Not before maxWaitMs (a look, when the subscription was live in time, saw it running),
          // and by the maxWaitMs timer: nothing else can end it before the 20 s timeout.
          for (const look of looks) expect(await look).toBe('P');
          expect(elapsed).toBeGreaterThanOrEqual(150);
          expect(elapsed).toBeLessThan(timeoutMs - TIMER_SLACK_MS);
        } finally {
          await store.close();
          await driver.close(other);
        }
      });

      test('one subscription per key and process, dropped when the last waiter leaves', async () => {
        const store = storeOn(client, { maxWaitMs: 10_000 });
        const key = uniqueKey('shared');
        const input = claimInput(key);
        await store.claim(input);
        const waits = Array.from({ length: 50 }, () => store.waitForChange!(key, 10_000));
        const channel = `${store.prefix}{${key}}:changed`;
        const count = () => shardSubscribers(redis, channel);
        await waitFor('the subscription', async () => (await count()) > 0);
        expect(await count()).toBe(1);
        await store.complete({
          key,
          token: input.token,
          state: 'completed',
          outcome: '1',
          ttlMs: 1000,
        });
        await Promise.all(waits);
        await waitFor('the unsubscription', async () => (await count()) === 0);
        await store.close();
      });

      test('close() wakes waiters and closes the subscriber it created, never the client', async () => {
        const store = storeOn(client, { maxWaitMs: 20_000 });
        const key = uniqueKey('close');
        await store.claim(claimInput(key));
        let woken = false;
        const waiting = store.waitForChange!(key, 20_000).then(() => {
          woken = true;
        });
        const channel = `${store.prefix}{${key}}:changed`;
        const count = () => shardSubscribers(redis, channel);
        await waitFor('the subscription', async () => (await count()) > 0);
        expect(await count()).toBe(1);
        expect(woken).toBe(false);
        await store.close();
        await waiting; // woken by close(), long before its 20 s timeout
        await waitFor('the subscriber to close', async () => (await count()) === 0);
        expect(await redis.ping()).toBe('PONG');
      });

      test('the executor replays across stores on separate connections', async () => {
        const prefix = testPrefix('executor');
        prefixes.push(prefix);
        const a = createRedisStore(client, { prefix });
        const bClient = await driver.connect(target);
        const b = createRedisStore(bClient, { prefix });
        try {
          const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: { app: 'web' } };
          // No sleeps: the second caller starts once the tool runs (the first holds the claim), and
          // the tool finishes once the second caller has seen it in progress.
          const running = Promise.withResolvers<void>();
          const seenInProgress = Promise.withResolvers<void>();
          const claimOnB = b.claim.bind(b);
          b.claim = async (input) => {
            const result = await claimOnB(input);
            if (result.status === 'in_progress') seenInProgress.resolve();
            return result;
          };
          let runs = 0;
          const tool = async () => {
            runs++;
            running.resolve();
            await seenInProgress.promise;
            return { deployed: 'ü🚀', runs };
          };
          const [first, second] = await Promise.all([
            createIdempotency({ store: a }).run(call, tool),
            running.promise.then(() => createIdempotency({ store: b }).run(call, tool)),
          ]);
          expect(runs).toBe(1);
          expect(first).toMatchObject({ replayed: false, value: { deployed: 'ü🚀', runs: 1 } });
          expect(second).toMatchObject({ replayed: true, outcome: 'waited', value: first.value });
        } finally {
          await a.close();
          await b.close();
          await driver.close(bClient);
        }
      });
    });

    describe('inspection', () => {
      test('list and stats see only this prefix (and records under an ioredis keyPrefix)', async () => {
        const keyPrefix = driver.family === 'ioredis' ? `${uniqueKey('kp')}:` : '';
        const client = await driver.connect(target, keyPrefix === '' ? {} : { keyPrefix });
        const prefix = testPrefix('list');
        prefixes.push(`${keyPrefix}${prefix}`);
        // A neighbour whose prefix starts with ours must not show up.
        const neighbour = createRedisStore(client, { prefix: `${prefix}x` });
        prefixes.push(`${keyPrefix}${prefix}x`);
        const store = createRedisStore(client, { prefix });
        try {
          const keys = Array.from({ length: 5 }, (_, i) => uniqueKey(`list-${i}`));
          for (const key of keys) {
            await store.claim({ ...claimInput(key), meta: { toolName: 'deploy', scope: 'acme' } });
          }
          await neighbour.claim(claimInput(uniqueKey('neighbour')));
          const page = await store.list({ limit: 3 });
          expect(page.records).toHaveLength(3);
          const rest = await store.list({ limit: 3, cursor: page.cursor! });
          const listed = [...page.records, ...rest.records].map((r) => r.key).sort();
          expect(listed).toEqual([...keys].sort());
          expect(rest.cursor).toBeUndefined();
          expect(page.records[0]).toMatchObject({
            state: 'in_progress',
            inspectionState: 'in_progress',
            meta: { toolName: 'deploy', scope: 'acme' },
          });
          expect(await store.stats()).toMatchObject({ records: 5, inProgress: 5 });
          expect(await neighbour.stats()).toMatchObject({ records: 1 });
        } finally {
          await store.close();
          await neighbour.close();
          await driver.close(client);
        }
      });

      test('a store that cannot reach Redis fails list and stats with StoreUnavailableError', async () => {
        const down = driver.down();
        const store = createRedisStore(down, { prefix: testPrefix('down') });
        await expect(store.list()).rejects.toSatisfy(StoreUnavailableError.isInstance);
        await expect(store.stats()).rejects.toSatisfy(StoreUnavailableError.isInstance);
        const error = await store.claim(claimInput(uniqueKey('down'))).catch((e: unknown) => e);
        expect(StoreUnavailableError.isInstance(error)).toBe(true);
        if (driver.family === 'node-redis') {
          // A node-redis client nobody connected: the message says what to do.
          expect((error as Error).message).toMatch(
            /The client is closed.*await client\.connect\(\)/,
          );
        }
        await driver.close(down);
      });
    });
  });
}

describe.skipIf(!up)('redis store on node-redis: reply types', () => {
  // The drivers above run node-redis 6 on RESP3 and node-redis 5 on RESP2 (their defaults);
  // here the other protocol of each, and a client whose typeMapping turns strings into Buffers
  // (the store asks for the default types on its own commands).
  const clients = [
    ['redis@6 on RESP2', () => createClient({ url, RESP: 2 })],
    ['redis@5 on RESP3', () => createClient5({ url, RESP: 3 })],
    [
      'redis@6 with Buffers for strings',
      () =>
        createClient({
          url,
          commandOptions: { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } },
        }),
    ],
  ] as const;
  for (const [label, create] of clients) {
    test(`${label}: claim, replay, drift, get, list and a wake-up by message`, async () => {
      type Client = {
        on(event: string, f: () => void): unknown;
        connect(): Promise<unknown>;
        duplicate(): Client;
        destroy(): void;
        sendCommand(...args: unknown[]): Promise<unknown>;
      };
      const client = create() as unknown as Client;
      client.on('error', () => {});
      await client.connect();
      const other = client.duplicate();
      other.on('error', () => {});
      await other.connect();
      const maxWaitMs = 20_000;
      const store = storeOn(client as unknown as RedisClient, { maxWaitMs });
      const waiter = createRedisStore(other as unknown as RedisClient, {
        prefix: store.prefix,
        maxWaitMs,
      });
      try {
        const key = uniqueKey('types');
        const owner = claimInput(key);
        const acquired = await store.claim({ ...owner, meta: { toolName: 'charge' } });
        expect(acquired.status).toBe('acquired');
        expect(await waiter.get(key)).toEqual(acquired.record);
        expect((await waiter.claim(claimInput(key))).status).toBe('in_progress');
        const looks: Promise<string>[] = [];
        const send = other.sendCommand.bind(other);
        (other as { sendCommand: unknown }).sendCommand = (...args: unknown[]) => {
          const reply = send(...args);
          const command = args[0] as string[];
          if (command[0] === 'GETRANGE' && command[3] === '0') looks.push(reply.then(String));
          return reply;
        };
        await expectWokenByPush({
          waiter,
          looks,
          key,
          maxWaitMs,
          change: () =>
            store.complete({
              key,
              token: owner.token,
              state: 'completed',
              outcome: '"ü€"',
              ttlMs: 60_000,
            }),
        });
        expect(await waiter.claim(claimInput(key))).toMatchObject({
          status: 'completed',
          record: { outcome: '"ü€"', meta: { toolName: 'charge' } },
        });
        expect((await waiter.claim({ ...claimInput(key), fingerprint: 'other' })).status).toBe(
          'drift',
        );
        const page = await waiter.list({ limit: 10 });
        expect(page.records.map((r) => [r.key, r.state, r.outcomeBytes])).toEqual([
          [key, 'completed', Buffer.byteLength('"ü€"')],
        ]);
        expect(await waiter.stats()).toMatchObject({ records: 1, completed: 1 });
      } finally {
        await waiter.close();
        await store.close();
        other.destroy();
        client.destroy();
      }
    });
  }
});
