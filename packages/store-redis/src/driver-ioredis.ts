/**
 * The driver for ioredis and iovalkey (an ioredis fork with the same API), single node and
 * Cluster. ioredis re-sends a command that was in flight when the connection dropped once it
 * reconnects (`autoResendUnfulfilledCommands`), which every script of the store is safe for.
 */
import type { Cluster, Redis } from 'ioredis';
import {
  type Driver,
  type IoRedisLikeClient,
  isNoScript,
  type PubSub,
  type ScanNode,
} from './driver.js';
import type { Script } from './scripts.js';

type Client = Redis | Cluster;

function scanNode(node: Redis): ScanNode {
  return {
    scan: async (cursor, match, count, type) =>
      type === undefined
        ? await node.scan(cursor, 'MATCH', match, 'COUNT', count)
        : await node.scan(cursor, 'MATCH', match, 'COUNT', count, 'TYPE', type),
  };
}

export function ioredisDriver(client: IoRedisLikeClient): Driver {
  const redis = client as unknown as Client;
  const isCluster = redis.isCluster === true;
  const kp = (redis.options as { keyPrefix?: unknown } | undefined)?.keyPrefix;
  return {
    family: 'ioredis',
    isCluster,
    keyPrefix: typeof kp === 'string' ? kp : '',
    // A Cluster client that has sharded subscribers knows the `shardedSubscribers` option
    // (ioredis puts it, false, in every Cluster's options); iovalkey 0.x does not.
    shardedPubSub: !isCluster || 'shardedSubscribers' in ((redis as Cluster).options as object),
    hint: ' (To fail fast while Redis is down, create the client with maxRetriesPerRequest: 1.)',

    async script({ lua, sha }: Script, keys, args) {
      try {
        return await redis.evalsha(sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await redis.eval(lua, keys.length, ...keys, ...args);
      }
    },

    stateOf: (key) => redis.getrange(key, 0, 0),
    get: (key) => redis.get(key),

    async time() {
      const [seconds, micros] = await (redis as Redis).time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    },

    async nodes() {
      if (!isCluster) return [scanNode(redis as Redis)];
      const name = (node: Redis) => `${String(node.options.host)}:${String(node.options.port)}`;
      return (redis as Cluster)
        .nodes('master')
        .sort((a, b) => (name(a) < name(b) ? -1 : 1))
        .map(scanNode);
    },

    async heads(keys, bytes) {
      if (isCluster) {
        return await Promise.all(
          keys.map(async (k) => {
            const [head, length] = await Promise.all([
              redis.getrange(k, 0, bytes - 1),
              redis.strlen(k),
            ]);
            return [head, length] as [string, number];
          }),
        );
      }
      const pipeline = redis.pipeline();
      for (const k of keys) pipeline.getrange(k, 0, bytes - 1).strlen(k);
      const results = (await pipeline.exec()) ?? [];
      const replies: Array<[string | null, number]> = [];
      for (let i = 0; i < keys.length; i++) {
        const head = results[2 * i];
        const length = results[2 * i + 1];
        if (head?.[0] != null) throw head[0];
        if (length?.[0] != null) throw length[0];
        replies.push([head?.[1] as string, Number(length?.[1])]);
      }
      return replies;
    },

    pubsub(mode, given, events): PubSub {
      const subscriber =
        (given as Client | undefined) ??
        (isCluster
          ? (redis as Cluster).duplicate([], {
              enableOfflineQueue: true,
              ...(mode === 'sharded' ? { shardedSubscribers: true } : {}),
            })
          : (redis as Redis).duplicate({ enableOfflineQueue: true }));
      if (given === undefined) {
        subscriber.on('error', () => {
          // Reconnects on its own; waiters fall back to their timers meanwhile.
        });
      }
      const event = mode === 'sharded' ? 'smessage' : 'message';
      subscriber.on(event, (_channel: string, payload: string) => events.message(payload));
      // Messages published while the subscriber is away are lost: reset when its connection
      // drops and when it is back.
      let connected = subscriber.status === 'ready';
      subscriber.on('close', () => events.reset());
      subscriber.on('ready', () => {
        if (connected) events.reset();
        connected = true;
      });
      return {
        subscribe: (channel) =>
          mode === 'sharded' ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel),
        unsubscribe: (channel) =>
          mode === 'sharded' ? subscriber.sunsubscribe(channel) : subscriber.unsubscribe(channel),
        close: () => subscriber.disconnect(),
      };
    },
  };
}
