/**
 * The clients every Redis store test runs on (test-only): ioredis, iovalkey, node-redis 6
 * (RESP3, its default) and node-redis 5 (RESP2, its default), each as a single node and as a
 * cluster. A test table-drives over `DRIVERS`; the worker of the processes tests builds its
 * store from a driver's name (`driverNamed`).
 */
import { type Command, Cluster as IoCluster, Redis as IoRedis } from 'ioredis';
import { Redis as Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { createClient as createClient6, createCluster as createCluster6 } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import type { RedisClient } from '../redis-store.js';

export interface Target {
  host: string;
  port: number;
}

export interface ConnectOptions {
  /**
   * Fail fast while the server is down (outage tests): ioredis `maxRetriesPerRequest: 1,
   * enableOfflineQueue: false`; node-redis `disableOfflineQueue: true`. Reconnects with backoff.
   */
  fastFail?: boolean;
  /** Reconnect at once after a cut (fault tests). */
  reconnectAtOnce?: boolean;
  /** Per-command timeout in ms (ioredis `commandTimeout`, node-redis `commandOptions.timeout`). */
  commandTimeout?: number;
  /** ioredis / iovalkey only. */
  keyPrefix?: string;
}

export interface TestDriver {
  readonly name: string;
  readonly family: 'ioredis' | 'node-redis';
  /** A connected client (errors swallowed: the store reports them). */
  connect(target: Target, options?: ConnectOptions): Promise<RedisClient>;
  /** A client of a server nobody runs (port 1): every command fails at once. */
  down(): RedisClient;
  /** A connected cluster client. */
  connectCluster(nodes: readonly Target[]): Promise<RedisClient>;
  /** True once the client is connected and ready for commands. */
  isReady(client: RedisClient): boolean;
  /** Close a client made here, now. */
  close(client: RedisClient): Promise<void>;
  /** The names of the commands a single-node client sends from now on (lowercase). */
  recordCommands(client: RedisClient): string[];
  /**
   * The replies of the `GETRANGE key 0 0` looks the store makes (`settled`), in order; see
   * `timing.ts`.
   */
  recordSettledLooks(client: RedisClient): Promise<string>[];
  /** Whether its cluster client subscribes on each shard (`notifications: 'sharded'`). */
  readonly clusterShardedPubSub: boolean;
  /** The cause of a command refused at once while the server is down (`fastFail`). */
  readonly offline: RegExp;
}

type IoLike = IoRedis;

function ioredisFamily(
  name: string,
  Single: typeof IoRedis,
  ClusterClass: typeof IoCluster,
  clusterShardedPubSub: boolean,
): TestDriver {
  const ready = (client: { status: string; once(e: string, f: () => void): unknown }) =>
    client.status === 'ready'
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          client.once('ready', resolve);
          client.once('end', () => reject(new Error(`${name}: the client ended before ready`)));
        });
  return {
    name,
    family: 'ioredis',
    clusterShardedPubSub,
    async connect({ host, port }, options = {}) {
      const client = new Single(port, host, {
        maxRetriesPerRequest: options.fastFail ? 1 : options.reconnectAtOnce ? 100 : 1,
        ...(options.fastFail
          ? { enableOfflineQueue: false, retryStrategy: (times) => Math.min(times * 50, 500) }
          : {}),
        ...(options.reconnectAtOnce ? { retryStrategy: () => 10 } : {}),
        ...(options.commandTimeout === undefined ? {} : { commandTimeout: options.commandTimeout }),
        ...(options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix }),
      });
      client.on('error', () => {});
      await ready(client);
      return client;
    },
    down() {
      const client = new Single('redis://127.0.0.1:1', {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => null,
      });
      client.on('error', () => {});
      return client;
    },
    async connectCluster(nodes) {
      const client = new ClusterClass([...nodes], { redisOptions: { maxRetriesPerRequest: 1 } });
      client.on('error', () => {});
      await ready(client);
      return client;
    },
    isReady: (client) => (client as IoLike).status === 'ready',
    async close(client) {
      (client as IoLike).disconnect();
    },
    recordCommands(client) {
      const sent: string[] = [];
      const c = client as IoLike;
      const send = c.sendCommand.bind(c);
      c.sendCommand = ((command: Command, stream?: Parameters<typeof send>[1]) => {
        sent.push(command.name.toLowerCase());
        return send(command, stream);
      }) as typeof c.sendCommand;
      return sent;
    },
    recordSettledLooks(client) {
      const looks: Promise<string>[] = [];
      const c = client as unknown as { getrange: (...args: unknown[]) => Promise<string> };
      const getrange = c.getrange.bind(c);
      c.getrange = (...args: unknown[]) => {
        const reply = getrange(...args);
        looks.push(reply);
        return reply;
      };
      return looks;
    },
    offline: /enableOfflineQueue options is false/,
  };
}

type NodeClient = {
  sendCommand: (...args: unknown[]) => Promise<unknown>;
  on(event: string, f: (...args: unknown[]) => void): unknown;
  connect(): Promise<unknown>;
  destroy(): void;
  isOpen: boolean;
};

function nodeRedisFamily(
  name: string,
  createClient: typeof createClient6 | typeof createClient5,
  createCluster: typeof createCluster6 | typeof createCluster5,
): TestDriver {
  return {
    name,
    family: 'node-redis',
    clusterShardedPubSub: true,
    async connect({ host, port }, options = {}) {
      if (options.keyPrefix !== undefined) throw new Error('node-redis has no keyPrefix');
      const client = (createClient as typeof createClient6)({
        url: `redis://${host}:${port}`,
        socket: {
          reconnectStrategy: options.reconnectAtOnce
            ? () => 10
            : (retries: number) => Math.min(retries * 50, 500),
        },
        ...(options.fastFail ? { disableOfflineQueue: true } : {}),
        ...(options.commandTimeout === undefined
          ? {}
          : { commandOptions: { timeout: options.commandTimeout } }),
      }) as unknown as NodeClient;
      client.on('error', () => {});
      await client.connect();
      return client as unknown as RedisClient;
    },
    down() {
      // Never connected: node-redis refuses every command (`The client is closed`).
      const client = (createClient as typeof createClient6)({ url: 'redis://127.0.0.1:1' });
      return client as unknown as RedisClient;
    },
    async connectCluster(nodes) {
      const client = (createCluster as typeof createCluster6)({
        rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      }) as unknown as NodeClient;
      client.on('error', () => {});
      await client.connect();
      return client as unknown as RedisClient;
    },
    isReady: (client) => (client as unknown as { isReady: boolean }).isReady,
    async close(client) {
      const c = client as unknown as NodeClient;
      if (c.isOpen) c.destroy();
    },
    recordCommands(client) {
      const sent: string[] = [];
      const c = client as unknown as NodeClient;
      const send = c.sendCommand.bind(c);
      c.sendCommand = (args: unknown, ...rest: unknown[]) => {
        sent.push(String((args as string[])[0]).toLowerCase());
        return send(args, ...rest);
      };
      return sent;
    },
    recordSettledLooks(client) {
      const looks: Promise<string>[] = [];
      const c = client as unknown as NodeClient;
      const send = c.sendCommand.bind(c);
      c.sendCommand = (...args: unknown[]) => {
        const reply = send(...args);
        // A single client: (args, options); a cluster: (firstKey, isReadonly, args, options).
        const command = (Array.isArray(args[0]) ? args[0] : args[2]) as string[];
        if (command[0] === 'GETRANGE' && command[2] === '0' && command[3] === '0') {
          looks.push(reply.then(String));
        }
        return reply;
      };
      return looks;
    },
    offline: /The client is offline/,
  };
}

export const DRIVERS: readonly TestDriver[] = [
  ioredisFamily('ioredis', IoRedis, IoCluster, true),
  ioredisFamily(
    'iovalkey',
    Valkey as unknown as typeof IoRedis,
    ValkeyCluster as unknown as typeof IoCluster,
    false, // iovalkey 0.4's Cluster has no sharded subscribers
  ),
  nodeRedisFamily('redis@6', createClient6, createCluster6),
  nodeRedisFamily('redis@5', createClient5, createCluster5),
];

export function driverNamed(name: string): TestDriver {
  const driver = DRIVERS.find((d) => d.name === name);
  if (driver === undefined) throw new Error(`no test driver named ${JSON.stringify(name)}`);
  return driver;
}

/** The shared Redis of the tests as a target. */
export function targetOf(url: string): Target {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port || 6379) };
}
