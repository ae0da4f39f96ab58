/**
 * Lost replies on a real Redis, on every client (DRIVERS): a TCP proxy on 127.0.0.1 swallows the
 * reply of one script (which ran on the server) and cuts the connection, and the script is sent
 * again after the reconnect (ioredis and iovalkey re-send it themselves,
 * `autoResendUnfulfilledCommands`; node-redis rejects it, `Socket closed unexpectedly`, and the
 * store's driver sends it once more); or the proxy holds the reply back until the command times
 * out. The operation sent again must answer what the first one did.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createIdempotency, StoreUnavailableError } from '@idempotent-tools/core';
import { serviceAvailable, uniqueKey } from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { createRedisStore, type RedisStore } from './index.js';
import { DRIVERS, type TestDriver } from './test-utils/drivers.js';
import { dropKeys, testPrefix } from './test-utils/keys.js';
import { type FaultProxy, startFaultProxy } from './test-utils/proxy.js';
import {
  freePorts,
  type RedisServer,
  startRedisServer,
  stopRedisServers,
  tempDir,
} from './test-utils/redis-server.js';

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
const binaries = await serviceAvailable({
  name: 'redis-server',
  url: 'PATH',
  probe: () => promisify(execFile)('redis-server', ['--version']),
});

const prefixes: string[] = [];
const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
  if (!up) return;
  for (const prefix of prefixes) await dropKeys(redis, prefix);
  await redis.quit();
});

/** A store on a `driver` client through a fault proxy in front of `port`. */
async function proxiedStore(
  driver: TestDriver,
  options: { port?: number; commandTimeout?: number } = {},
): Promise<{ store: RedisStore; proxy: FaultProxy }> {
  const proxy = await startFaultProxy({ host: '127.0.0.1', port: options.port ?? 6379 });
  cleanup.push(() => proxy.close());
  // Reconnects at once after a cut.
  const client = await driver.connect(
    { host: '127.0.0.1', port: proxy.port },
    {
      reconnectAtOnce: true,
      ...(options.commandTimeout === undefined ? {} : { commandTimeout: options.commandTimeout }),
    },
  );
  cleanup.push(() => driver.close(client));
  const prefix = testPrefix('faults');
  prefixes.push(prefix);
  const store = createRedisStore(client, { prefix });
  // Load the scripts (EVALSHA, NOSCRIPT, EVAL): every operation below is one EVALSHA.
  const warm = { key: uniqueKey('warm'), fingerprint: 'fp', token: randomUUID() };
  await store.claim({ ...warm, leaseMs: 1000, ttlMs: 1000 });
  await store.complete({ ...warm, state: 'completed', outcome: '1', ttlMs: 1000 });
  return { store, proxy };
}

const claimInput = (key: string) => ({
  key,
  fingerprint: 'fp',
  token: randomUUID(),
  leaseMs: 30_000,
  ttlMs: 60_000,
});

for (const driver of DRIVERS) {
  describe.skipIf(!up)(`redis store on ${driver.name}: a reply lost on the way back`, () => {
    test('a claim whose reply is lost is re-sent after the reconnect and answers acquired, with its own record', async () => {
      const { store, proxy } = await proxiedStore(driver);
      const key = uniqueKey('lost-claim');
      const input = claimInput(key);
      proxy.dropNextReply();
      const result = await store.claim(input);
      expect(proxy.dropped).toBe(1); // the first claim ran, its reply never arrived
      expect(result.status).toBe('acquired');
      if (result.status !== 'acquired') return;
      expect(result.token).toBe(input.token);
      expect(result.record).toMatchObject({ key, state: 'in_progress', token: input.token });
      // One record, the claimer's, as stored.
      const seen = createRedisStore(redis, { prefix: store.prefix });
      expect(await seen.get(key)).toEqual(result.record);
      expect((await seen.claim(claimInput(key))).status).toBe('in_progress');
    });

    test('an executor call whose claim reply is lost runs the tool once, not waiting for itself', async () => {
      const { store, proxy } = await proxiedStore(driver);
      const idempotency = createIdempotency({ store, waitTimeout: 2000 });
      const call = { toolName: 'charge', turnId: uniqueKey('turn'), args: { cents: 500 } };
      let runs = 0;
      proxy.dropNextReply();
      const first = await idempotency.run(call, async () => ({ charge: ++runs }));
      expect(proxy.dropped).toBe(1);
      expect(first).toMatchObject({ replayed: false, outcome: 'executed', value: { charge: 1 } });
      const retry = await idempotency.run(call, async () => ({ charge: ++runs }));
      expect(retry).toMatchObject({ replayed: true, value: { charge: 1 } });
      expect(runs).toBe(1);
    });

    test('a complete whose reply is lost is re-sent and answers true: the call is executed, not persist_failed', async () => {
      const { store, proxy } = await proxiedStore(driver);
      const idempotency = createIdempotency({ store });
      const call = { toolName: 'charge', turnId: uniqueKey('turn'), args: { cents: 700 } };
      let runs = 0;
      const first = await idempotency.run(call, async () => {
        runs++;
        proxy.dropNextReply(); // the next reply is the complete's
        return { charge: runs };
      });
      expect(proxy.dropped).toBe(1);
      expect(first).toMatchObject({ replayed: false, outcome: 'executed', value: { charge: 1 } });
      const retry = await idempotency.run(call, async () => ({ charge: ++runs }));
      expect(retry).toMatchObject({ replayed: true, value: { charge: 1 } });
      expect(runs).toBe(1);
    });

    // node-redis (5.12, 6.3): a per-command timeout (commandOptions.timeout) does not end a
    // command already written whose reply is held back, so only ioredis and iovalkey time out.
    test.runIf(driver.family === 'ioredis')(
      'a claim that timed out (commandTimeout) and is sent again with the same token answers acquired',
      async () => {
        const { store, proxy } = await proxiedStore(driver, { commandTimeout: 200 });
        const key = uniqueKey('timed-out-claim');
        const input = claimInput(key);
        const held = proxy.holdNextReply();
        const error = await store.claim(input).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(StoreUnavailableError.isInstance(error)).toBe(true);
        await held.held; // the script ran: its reply reached the proxy
        held.release();
        const again = await store.claim(input);
        expect(again.status).toBe('acquired');
        expect(again.record.token).toBe(input.token);
      },
    );
  });

  describe.skipIf(!binaries)(
    `redis store on ${driver.name}: a reply lost across a restart (AOF)`,
    () => {
      const temp = tempDir('faults-aof');
      const servers: RedisServer[] = [];
      afterAll(async () => {
        await Promise.all(servers.map((server) => server.kill()));
        await stopRedisServers();
        temp.remove();
      });

      test('a complete whose reply was lost, re-sent after Redis restarted from its AOF, answers true', async () => {
        const [port] = await freePorts(1);
        const args = ['--appendonly', 'yes', '--appendfsync', 'always'];
        const start = async () => {
          const server = await startRedisServer({ port: port!, dir: temp.dir, args });
          servers.push(server);
          return server;
        };
        let server = await start();
        const { store, proxy } = await proxiedStore(driver, { port: port! });
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'deploy', turnId: uniqueKey('turn'), args: { v: 2 } };
        let runs = 0;
        const first = await idempotency.run(call, async () => {
          runs++;
          // The complete runs and is fsynced (appendfsync always) before Redis replies; the reply
          // is swallowed, Redis is killed and restarted from the AOF, then the complete is sent
          // again (EVALSHA, NOSCRIPT on the fresh server, EVAL).
          proxy.dropNextReply(async () => {
            await server.kill();
            server = await start();
          });
          return { deployed: runs };
        });
        expect(proxy.dropped).toBe(1);
        expect(first).toMatchObject({
          replayed: false,
          outcome: 'executed',
          value: { deployed: 1 },
        });
        const retry = await idempotency.run(call, async () => ({ deployed: ++runs }));
        expect(retry).toMatchObject({ replayed: true, value: { deployed: 1 } });
        expect(runs).toBe(1);
      });
    },
  );
}
