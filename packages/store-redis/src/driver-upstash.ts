/**
 * The driver for Upstash's REST client (`@upstash/redis`): every command is one HTTPS request,
 * so the store runs where a TCP client cannot (Cloudflare Workers, the Vercel Edge runtime, a
 * function frozen between invocations, whose sockets reset). A claim (and so a replay), a
 * complete, a release and a renew are one request each: `EVALSHA`, and `EVAL` once after a
 * `NOSCRIPT`. REST has no pub/sub connection to keep, so the store's waiters poll
 * (`notifications: 'off'`; see the README for what a wait costs in requests).
 *
 * The client's own decoding is fine either way: with `automaticDeserialization` (its default)
 * it parses replies as JSON where they parse, and no reply of the store's scripts does (a record
 * starts with its state letter; counts and clocks are integers already).
 */
import type { Driver, PubSub, ScanNode, UpstashLikeClient } from './driver.js';
import { isNoScript } from './driver.js';
import type { Script } from './scripts.js';

/** What the driver uses of the client (the structural type above is what `toDriver` checks). */
interface Client extends UpstashLikeClient {
  getrange(key: string, start: number, end: number): Promise<string>;
  get(key: string): Promise<unknown>;
  time(): Promise<[number, number]>;
  scan(
    cursor: string,
    options: { match: string; count: number; type?: string },
  ): Promise<[string | number, string[]]>;
  pipeline(): {
    getrange(key: string, start: number, end: number): unknown;
    strlen(key: string): unknown;
    exec(): Promise<unknown[]>;
  };
}

/** True for an `@upstash/redis` client: its command methods, and no connection of its own. */
export function isUpstashClient(client: Record<string, unknown>): boolean {
  return (
    typeof client.evalsha === 'function' &&
    typeof client.pipeline === 'function' &&
    typeof client.duplicate !== 'function' &&
    typeof client.sendCommand !== 'function'
  );
}

const text = (value: unknown): string | null =>
  value === null || value === undefined ? null : String(value);

export function upstashDriver(client: UpstashLikeClient): Driver {
  const redis = client as Client;
  const node: ScanNode = {
    async scan(cursor, match, count, type) {
      const [next, keys] = await redis.scan(cursor, {
        match,
        count,
        ...(type === undefined ? {} : { type }),
      });
      return [String(next), keys.map(String)];
    },
  };
  return {
    family: 'upstash',
    isCluster: false,
    keyPrefix: '',
    shardedPubSub: false,
    hint: ' (The store reaches Upstash over HTTPS: check the client url and token, and that the database is reachable from here.)',

    async script({ lua, sha }: Script, keys, args) {
      try {
        return await redis.evalsha(sha, [...keys], [...args]);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await redis.eval(lua, [...keys], [...args]);
      }
    },

    stateOf: async (key) => String(await redis.getrange(key, 0, 0)),
    get: async (key) => text(await redis.get(key)),

    async time() {
      const [seconds, micros] = await redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    },

    nodes: async () => [node],

    async heads(keys, bytes) {
      if (keys.length === 0) return [];
      const pipeline = redis.pipeline();
      for (const k of keys) {
        pipeline.getrange(k, 0, bytes - 1);
        pipeline.strlen(k);
      }
      const replies = await pipeline.exec();
      return keys.map((_, i) => [text(replies[2 * i]), Number(replies[2 * i + 1])]);
    },

    pubsub(): PubSub {
      // Never called: the store refuses notifications other than 'off' for this client.
      throw new Error('@upstash/redis has no pub/sub connection for the store');
    },
  };
}
