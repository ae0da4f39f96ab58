import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createIdempotency, InvalidInputError } from '@idempotent-tools/core';
import { runStoreConformance, serviceAvailable, sleep, uniqueKey } from '@idempotent-tools/testing';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createRedisStore, type RedisClient, type RedisStoreOptions } from './index.js';
import { DRIVERS } from './test-utils/drivers.js';
import { countKeys, testPrefix } from './test-utils/keys.js';
import { type RedisClusterHandle, startRedisCluster } from './test-utils/redis-cluster.js';
import { expectWokenByPush } from './test-utils/timing.js';

// The Cluster is started here from the redis-server and redis-cli binaries (no shared service).
const binaries = await serviceAvailable({
  name: 'redis-server and redis-cli',
  url: 'PATH',
  probe: async () => {
    await promisify(execFile)('redis-server', ['--version']);
    await promisify(execFile)('redis-cli', ['--version']);
  },
});

let handle: RedisClusterHandle | undefined;
/** The tests' admin client (ioredis): raw counts and writes, whatever client a store uses. */
let admin: Cluster;

function connect(): Cluster {
  const client = new Cluster(handle!.nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
  client.on('error', () => {});
  return client;
}

async function ready(client: Cluster): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('end', () => reject(new Error('the Cluster client ended before ready')));
  });
}

describe.skipIf(!binaries)('redis store on a 3-master Redis Cluster', () => {
  beforeAll(async () => {
    handle = await startRedisCluster({ masters: 3 });
    admin = connect();
    await ready(admin);
  });

  afterAll(async () => {
    admin?.disconnect();
    await handle?.stop();
  });

  for (const driver of DRIVERS) {
    describe(`on ${driver.name}`, () => {
      let cluster: RedisClient;
      const connectCluster = () => driver.connectCluster(handle!.nodes);
      // A cluster client without sharded subscribers (iovalkey) runs on classic pub/sub.
      const notify: RedisStoreOptions = driver.clusterShardedPubSub
        ? {}
        : { notifications: 'classic' };
      beforeAll(async () => {
        cluster = await connectCluster();
      });
      afterAll(async () => {
        if (cluster !== undefined) await driver.close(cluster);
      });

      runStoreConformance({
        name: 'conformance',
        describe,
        test,
        expect,
        clock: 'real',
        createStore: ({ timeoutMs }) =>
          createRedisStore(cluster, { ...notify, timeoutMs, prefix: testPrefix('cluster') }),
        raw: { count: (store) => countKeys(admin, store.prefix) },
        corruptRecord: async (store, key) => {
          await admin.set(`${store.prefix}{${key}}`, 'not a record', 'PX', 120_000);
        },
      });

      const claimInput = (key: string) => ({
        key,
        fingerprint: 'fp',
        token: randomUUID(),
        leaseMs: 30_000,
        ttlMs: 60_000,
      });

      test('records spread over every master, each operation on its record slot', async () => {
        const store = createRedisStore(cluster, { ...notify, prefix: testPrefix('spread') });
        const base = uniqueKey('spread');
        for (let i = 0; i < 60; i++) await store.claim(claimInput(`${base}-${i}`));
        const perNode = await Promise.all(
          admin.nodes('master').map(async (node) => Number(await node.dbsize())),
        );
        expect(perNode).toHaveLength(3);
        for (const n of perNode) expect(n).toBeGreaterThan(0);
        expect(await countKeys(admin, store.prefix)).toBe(60);
        expect(await store.purgeExpired()).toBe(0);
      });

      test.runIf(!driver.clusterShardedPubSub)(
        "refuses notifications: 'sharded' at wrap time, naming 'classic'",
        () => {
          let error: unknown;
          try {
            createRedisStore(cluster, { notifications: 'sharded' });
          } catch (e) {
            error = e;
          }
          expect(InvalidInputError.isInstance(error)).toBe(true);
          expect((error as InvalidInputError).field).toBe('notifications');
          expect((error as Error).message).toMatch(/notifications: 'classic'/);
        },
      );

      for (const notifications of ['sharded', 'classic'] as const) {
        if (notifications === 'sharded' && !driver.clusterShardedPubSub) continue;
        test(`${notifications} pub/sub wakes a waiter on another Cluster connection`, async () => {
          const maxWaitMs = 20_000;
          const options: RedisStoreOptions = {
            prefix: testPrefix(`cluster-${notifications}`),
            notifications,
            maxWaitMs,
          };
          const other = await connectCluster();
          const owner = createRedisStore(cluster, options);
          const waiter = createRedisStore(other, options);
          const looks = driver.recordSettledLooks(other);
          try {
            const times: number[] = [];
            for (let i = 0; i < 5; i++) {
              const key = uniqueKey('wake'); // a new slot (and often a new node) each time
              const input = claimInput(key);
              await owner.claim(input);
              // Subscribed and still running, then complete: the message wakes it (not a timer).
              const ms = await expectWokenByPush({
                waiter,
                looks,
                key,
                maxWaitMs,
                change: () =>
                  owner.complete({
                    key,
                    token: input.token,
                    state: 'completed',
                    outcome: '"done"',
                    ttlMs: 1000,
                  }),
              });
              times.push(Math.round(ms));
            }
            console.info(
              `[store-redis] cluster ${notifications} pub/sub wake-ups: ${times.join(', ')} ms`,
            );
          } finally {
            await waiter.close();
            await owner.close();
            await driver.close(other);
          }
        });
      }

      test('the executor replays across two Cluster connections, the tool runs once', async () => {
        const prefix = testPrefix('cluster-executor');
        const other = await connectCluster();
        const a = createRedisStore(cluster, { ...notify, prefix });
        const b = createRedisStore(other, { ...notify, prefix });
        try {
          let runs = 0;
          const tool = async () => {
            runs++;
            await sleep(200);
            return { ok: '✓', runs };
          };
          const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: { app: 'web' } };
          const results = await Promise.all([
            createIdempotency({ store: a }).run(call, tool),
            ...Array.from({ length: 10 }, () =>
              sleep(20).then(() => createIdempotency({ store: b }).run(call, tool)),
            ),
          ]);
          expect(runs).toBe(1);
          expect(results.filter((r) => r.replayed)).toHaveLength(10);
          for (const r of results) expect(r.value).toEqual({ ok: '✓', runs: 1 });
        } finally {
          await a.close();
          await b.close();
          await driver.close(other);
        }
      });
    });
  }
});
