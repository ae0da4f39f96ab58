import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createIdempotency, IdempotencyError } from '@idempotent-tools/core';
import { serviceAvailable, sleep, uniqueKey } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { createRedisStore, type RedisClient } from './index.js';
import { DRIVERS, type TestDriver } from './test-utils/drivers.js';
import {
  freePorts,
  type RedisServer,
  startRedisServer,
  stopRedisServers,
  tempDir,
} from './test-utils/redis-server.js';

// The outage would disturb the shared Redis, so each test starts a throwaway redis-server.
const binaries = await serviceAvailable({
  name: 'redis-server',
  url: 'PATH',
  probe: () => promisify(execFile)('redis-server', ['--version']),
});

const temp = tempDir('outage');
const servers: RedisServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => server.kill()));
  await stopRedisServers();
  temp.remove();
});

async function start(port: number, args: string[] = []): Promise<RedisServer> {
  const server = await startRedisServer({ port, dir: temp.dir, args });
  servers.push(server);
  return server;
}

/**
 * What the docs recommend for fast failure: ioredis one retry per command and no offline queue,
 * node-redis `disableOfflineQueue: true`; both reconnect with a backoff.
 */
function connect(driver: TestDriver, port: number): Promise<RedisClient> {
  return driver.connect({ host: '127.0.0.1', port }, { fastFail: true });
}

async function ready(driver: TestDriver, client: RedisClient, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!driver.isReady(client)) {
    if (Date.now() > deadline) throw new Error(`${driver.name} client not ready`);
    await sleep(20);
  }
}

/**
 * The error code a promise rejects with, the message of its cause (what the client said), when
 * (performance.now()) and how long it took.
 */
async function failure(
  promise: Promise<unknown>,
): Promise<{ code: string; cause: string; ms: number; at: number }> {
  const start = performance.now();
  try {
    await promise;
  } catch (error) {
    const code = IdempotencyError.isInstance(error) ? error.code : String(error);
    const cause = (error as { cause?: unknown }).cause;
    const at = performance.now();
    return {
      code,
      cause: cause instanceof Error ? cause.message : String(cause),
      ms: at - start,
      at,
    };
  }
  throw new Error('expected the call to fail');
}

for (const driver of DRIVERS) {
  describe.skipIf(!binaries)(`redis store on ${driver.name} when Redis goes away`, () => {
    test('calls fail closed with store_unavailable while Redis is down, and work once it is back', async () => {
      const [port] = await freePorts(1);
      let server = await start(port!);
      const client = await connect(driver, port!);
      const waiterClient = await connect(driver, port!);
      const store = createRedisStore(client);
      const waiterStore = createRedisStore(waiterClient);
      const idempotency = createIdempotency({ store, lease: 2000 });
      let runs = 0;
      const tool = async (args: { n: number }) => {
        runs++;
        return { n: args.n };
      };
      const call = (n: number) => ({ toolName: 'charge', turnId: 'turn-1', args: { n } });
      try {
        expect((await idempotency.run(call(1), tool)).replayed).toBe(false);
        expect((await idempotency.run(call(1), tool)).replayed).toBe(true);
        expect(runs).toBe(1);

        // Mid-run: one call holds its claim and runs, another (other connection) waits for it.
        // No sleeps: the waiter starts once the tool runs, Redis dies once the waiter saw the
        // call in progress, and the tool returns only after that.
        const toolRunning = Promise.withResolvers<void>();
        const killed = Promise.withResolvers<void>();
        const heldTool = async (args: { n: number }) => {
          runs++;
          toolRunning.resolve();
          await killed.promise;
          return { n: args.n };
        };
        const waiterSawIt = Promise.withResolvers<void>();
        const claimOnWaiter = waiterStore.claim.bind(waiterStore);
        waiterStore.claim = async (input) => {
          const result = await claimOnWaiter(input);
          if (result.status === 'in_progress') waiterSawIt.resolve();
          return result;
        };
        const running = failure(idempotency.run(call(2), heldTool));
        await toolRunning.promise;
        const waiting = failure(createIdempotency({ store: waiterStore }).run(call(2), tool));
        await waiterSawIt.promise;
        const killedAt = performance.now();
        await server.kill(); // SIGKILL: no save, like a crash
        killed.resolve();
        // The running tool cannot store its outcome: the call fails, it does not pretend success.
        expect((await running).code).toBe('persist_failed');
        const waited = await waiting;
        expect(waited.code).toBe('store_unavailable');
        expect(runs).toBe(2);

        // New calls fail fast and closed: the tool does not run. Fast is what the client says,
        // not a time: it refuses the command at once (no offline queue), where a slow failure
        // would wait for a reconnection and end in "max retries per request".
        const times: number[] = [];
        for (let n = 3; n < 6; n++) {
          const { code, cause, ms } = await failure(idempotency.run(call(n), tool));
          expect(code).toBe('store_unavailable');
          expect(cause).toMatch(driver.offline);
          times.push(Math.round(ms));
        }
        expect(runs).toBe(2);
        const restartedAt = performance.now();

        server = await start(port!);
        await ready(driver, client);
        await ready(driver, waiterClient);
        console.info(
          `[store-redis] ${driver.name} outage: waiter failed ${Math.round(waited.at - killedAt)} ms after the kill, new calls after ${times.join(', ')} ms; clients ready ${Math.round(performance.now() - restartedAt)} ms after the restart began`,
        );
        // Calls work again. No persistence: the record of call 1 was lost with the process, so
        // it runs again (the durability trade-off in the README).
        expect(await idempotency.run(call(3), tool)).toMatchObject({ replayed: false });
        expect(await idempotency.run(call(3), tool)).toMatchObject({ replayed: true });
        expect(await idempotency.run(call(1), tool)).toMatchObject({ replayed: false });
        expect(runs).toBe(4);
      } finally {
        await store.close();
        await waiterStore.close();
        await driver.close(client);
        await driver.close(waiterClient);
      }
    });

    test("Redis down with the client's default options (retries, offline queue): a call fails at the store's deadline, not minutes later", async () => {
      const [port] = await freePorts(1);
      const server = await start(port!);
      const client = await driver.connect({ host: '127.0.0.1', port: port! });
      const store = createRedisStore(client, { timeoutMs: 1_000 });
      const idempotency = createIdempotency({ store });
      let runs = 0;
      const call = { toolName: 'charge', turnId: uniqueKey('turn'), args: {} };
      try {
        await server.kill();
        const { code, ms } = await failure(idempotency.run(call, async () => ++runs));
        expect(code).toBe('store_unavailable');
        expect(runs).toBe(0);
        // Before the fix: ioredis's defaults (20 retries with back-off) took 394 s. The claim is
        // sent up to 4 times, each bounded by the 1 s deadline.
        expect(ms).toBeLessThan(30_000);
        console.info(
          `[store-redis] ${driver.name} with its default options, Redis down: the call failed after ${Math.round(ms)} ms (timeoutMs 1000)`,
        );
      } finally {
        await store.close();
        await driver.close(client);
      }
    });

    test('with appendonly yes + appendfsync always, completed records survive a crash (durable: true)', async () => {
      const [port] = await freePorts(1);
      const aof = ['--appendonly', 'yes', '--appendfsync', 'always'];
      const dir = `${temp.dir}/aof-${port}`;
      await promisify(execFile)('mkdir', ['-p', dir]);
      let server = await startRedisServer({ port: port!, dir, args: aof });
      servers.push(server);
      const client = await connect(driver, port!);
      const store = createRedisStore(client, { durable: true });
      expect(store.capabilities.durable).toBe(true);
      const idempotency = createIdempotency({ store });
      let runs = 0;
      const call = { toolName: 'charge', turnId: uniqueKey('turn'), args: { amount: 1 } };
      const tool = async () => ({ run: ++runs, text: 'ü€𝄞' });
      try {
        expect(await idempotency.run(call, tool)).toMatchObject({ replayed: false });
        await server.kill();
        expect((await failure(idempotency.run(call, tool))).code).toBe('store_unavailable');
        server = await startRedisServer({ port: port!, dir, args: aof });
        servers.push(server);
        await ready(driver, client);
        expect(await idempotency.run(call, tool)).toMatchObject({
          replayed: true,
          value: { run: 1, text: 'ü€𝄞' },
        });
        expect(runs).toBe(1);
      } finally {
        await store.close();
        await driver.close(client);
      }
    });
  });
}
