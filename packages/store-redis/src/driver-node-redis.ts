/**
 * The driver for node-redis (`redis` / `@redis/client` 5 and 6): a client from `createClient`
 * or a cluster from `createCluster`, connected by the user.
 *
 * - Commands go through `sendCommand` with the default type mapping (strings, numbers, arrays),
 *   whatever `typeMapping` the client has, in RESP2 (v5's default) as in RESP3 (v6's).
 * - node-redis rejects the commands in flight when the connection drops (`Socket closed
 *   unexpectedly`) where ioredis re-sends them: the driver sends such a script once more (every
 *   script is safe to re-send: a claim meeting its own token answers acquired, a complete meeting
 *   its own outcome answers true), so a lost reply strands no record, as with ioredis.
 * - Subscriptions need a connection of their own: `duplicate()`, connected on the first wait.
 */
import {
  type Driver,
  isNoScript,
  type NodeRedisLikeClient,
  type PubSub,
  plain,
  type ScanNode,
} from './driver.js';
import type { Script } from './scripts.js';

type Listener = (message: string, channel: string) => void;

/** What the driver uses of a node-redis client or cluster (both v5 and v6 have it). */
interface PubSubClient {
  connect(): Promise<unknown>;
  readonly isOpen: boolean;
  subscribe(channel: string, listener: Listener): Promise<void>;
  unsubscribe(channel: string, listener: Listener): Promise<void>;
  sSubscribe(channel: string, listener: Listener): Promise<void>;
  sUnsubscribe(channel: string, listener: Listener): Promise<void>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  destroy?(): void;
  disconnect?(): Promise<void>;
}

interface SingleClient extends PubSubClient {
  sendCommand(args: readonly string[], options?: object): Promise<unknown>;
  duplicate(): SingleClient;
}

interface ClusterClient extends PubSubClient {
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: readonly string[],
    options?: object,
  ): Promise<unknown>;
  duplicate(): ClusterClient;
  readonly masters: Array<{ host: string; port: number }>;
  nodeClient(node: { host: string; port: number }): SingleClient | Promise<SingleClient>;
}

/** The default reply types, whatever the client's own `typeMapping`. */
const DEFAULT_TYPES = { typeMapping: {} };

/** The connection dropped with the command in flight: it may or may not have run. */
function isLostInFlight(error: unknown): boolean {
  return (
    error instanceof Error &&
    (error.name === 'SocketClosedUnexpectedlyError' ||
      error.message === 'Socket closed unexpectedly')
  );
}

function scanNode(send: (args: string[]) => Promise<unknown>): ScanNode {
  return {
    async scan(cursor, match, count, type) {
      const args = ['SCAN', cursor, 'MATCH', match, 'COUNT', String(count)];
      if (type !== undefined) args.push('TYPE', type);
      const [next, keys] = plain(await send(args)) as [string, string[]];
      return [String(next), keys];
    },
  };
}

export function nodeRedisDriver(client: NodeRedisLikeClient): Driver {
  const c = client as unknown as Record<string, unknown>;
  const isCluster = typeof c.nodeClient === 'function' && 'masters' in c;
  const single = client as unknown as SingleClient;
  const cluster = client as unknown as ClusterClient;
  /** Send a command; `key` routes it on a cluster. Replies are plain values. */
  const send = async (key: string | undefined, readonly: boolean, args: string[]) =>
    plain(
      isCluster
        ? await cluster.sendCommand(key, readonly, args, DEFAULT_TYPES)
        : await single.sendCommand(args, DEFAULT_TYPES),
    );

  const evalsha = async ({ lua, sha }: Script, keys: readonly string[], args: string[]) => {
    const tail = [String(keys.length), ...keys, ...args];
    try {
      return await send(keys[0], false, ['EVALSHA', sha, ...tail]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return await send(keys[0], false, ['EVAL', lua, ...tail]);
    }
  };

  return {
    family: 'node-redis',
    isCluster,
    keyPrefix: '',
    shardedPubSub: true, // `sSubscribe` on a cluster subscribes on the channel's shard
    hint: ' (node-redis: the client must be connected first, await client.connect(); to fail fast while Redis is down, create it with disableOfflineQueue: true.)',

    async script(script, keys, args) {
      const strings = args.map(String);
      try {
        return await evalsha(script, keys, strings);
      } catch (error) {
        if (!isLostInFlight(error)) throw error;
        // Sent again once node-redis reconnects (or at once refused, with no offline queue).
        return await evalsha(script, keys, strings);
      }
    },

    stateOf: async (key) => String(await send(key, true, ['GETRANGE', key, '0', '0'])),
    get: async (key) => (await send(key, true, ['GET', key])) as string | null,

    async time() {
      const [seconds, micros] = (await send(undefined, true, ['TIME'])) as [string, string];
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    },

    async nodes() {
      if (!isCluster) return [scanNode((args) => send(undefined, true, args))];
      const name = (node: { host: string; port: number }) => `${node.host}:${node.port}`;
      const masters = [...cluster.masters].sort((a, b) => (name(a) < name(b) ? -1 : 1));
      return await Promise.all(
        masters.map(async (master) => {
          const node = await cluster.nodeClient(master);
          return scanNode(async (args) => plain(await node.sendCommand(args, DEFAULT_TYPES)));
        }),
      );
    },

    async heads(keys, bytes) {
      // node-redis pipelines the commands of one tick by itself.
      const replies = await Promise.all(
        keys.flatMap((k) => [
          send(k, true, ['GETRANGE', k, '0', String(bytes - 1)]),
          send(k, true, ['STRLEN', k]),
        ]),
      );
      return keys.map((_, i) => [replies[2 * i] as string | null, Number(replies[2 * i + 1])]);
    },

    pubsub(mode, given, events): PubSub {
      const owned = given === undefined;
      const subscriber = owned
        ? isCluster
          ? cluster.duplicate()
          : single.duplicate()
        : (given as unknown as PubSubClient);
      if (owned) {
        subscriber.on('error', () => {
          // Reconnects on its own; waiters fall back to their timers meanwhile.
        });
      }
      const listener: Listener = (message) => events.message(message);
      // Messages published while a connection is away are lost: reset when one drops and when
      // it is back (a cluster reports each node's connection).
      const down = new Set<string>();
      const dropped = (node: unknown) => {
        down.add(nodeName(node));
        events.reset();
      };
      const back = (node: unknown) => {
        if (down.delete(nodeName(node))) events.reset();
      };
      subscriber.on(isCluster ? 'node-reconnecting' : 'reconnecting', dropped);
      subscriber.on(isCluster ? 'node-ready' : 'ready', back);
      let connecting: Promise<unknown> | undefined;
      const open = () => {
        if (subscriber.isOpen) return connecting ?? Promise.resolve();
        if (!owned) return Promise.reject(new Error('the subscriber connection is not open'));
        connecting ??= subscriber.connect().catch((error: unknown) => {
          connecting = undefined; // the next waiter tries again
          throw error;
        });
        return connecting;
      };
      return {
        subscribe: async (channel) => {
          await open();
          await (mode === 'sharded'
            ? subscriber.sSubscribe(channel, listener)
            : subscriber.subscribe(channel, listener));
        },
        unsubscribe: async (channel) => {
          if (!subscriber.isOpen) return;
          await (mode === 'sharded'
            ? subscriber.sUnsubscribe(channel, listener)
            : subscriber.unsubscribe(channel, listener));
        },
        close: () => {
          if (typeof subscriber.destroy === 'function') {
            if (subscriber.isOpen) subscriber.destroy();
          } else {
            subscriber.disconnect?.().catch(() => {});
          }
        },
      };
    },
  };
}

/** A cluster event's node (`{ host, port }`), or '' for a single client's events. */
function nodeName(node: unknown): string {
  const n = node as { host?: unknown; port?: unknown } | undefined;
  return n !== undefined && n !== null && typeof n === 'object'
    ? `${String(n.host)}:${String(n.port)}`
    : '';
}
