/**
 * The driver layer: what the store needs from a Redis client, whichever client it is. The Lua
 * scripts, the record format and every decision live in the store; a driver only sends commands
 * and subscriptions the way its client family wants them:
 * - `ioredis` and its fork `iovalkey` (single node and Cluster): `driver-ioredis.ts`;
 * - node-redis (`redis` / `@redis/client` 5 and 6: `createClient`, `createCluster`):
 *   `driver-node-redis.ts`;
 * - Upstash's REST client (`@upstash/redis`), over HTTPS: `driver-upstash.ts`.
 * The client types here are structural (no import of any client), so the published types need
 * none of them installed.
 */
import type { Script } from './scripts.js';

/**
 * An ioredis or iovalkey client: a single node (`new Redis()`) or a Cluster
 * (`new Redis.Cluster([...])`). Structural: any client with ioredis' command methods.
 */
export interface IoRedisLikeClient {
  evalsha(...args: never[]): Promise<unknown>;
  duplicate(...args: never[]): unknown;
  readonly status: string;
}

/**
 * A node-redis client from `createClient()` (connected: `await client.connect()`), or a cluster
 * from `createCluster()` (connected too). `redis` and `@redis/client` 5 and 6.
 */
export interface NodeRedisLikeClient {
  sendCommand(...args: never[]): Promise<unknown>;
  duplicate(...args: never[]): unknown;
  readonly isOpen: boolean;
  readonly isReady: boolean;
}

/** An `@upstash/redis` client (`new Redis({ url, token })`, `Redis.fromEnv()`). Structural. */
export interface UpstashLikeClient {
  evalsha(sha: string, keys: string[], args: unknown[]): Promise<unknown>;
  eval(script: string, keys: string[], args: unknown[]): Promise<unknown>;
  pipeline(): unknown;
}

/**
 * A client the store takes: ioredis, iovalkey, or node-redis (single node or cluster), or
 * Upstash's REST client `@upstash/redis` (`driver-upstash.ts`).
 */
export type RedisClient = IoRedisLikeClient | NodeRedisLikeClient | UpstashLikeClient;

/** One node to `SCAN` (a single node, or a master of a cluster). */
export interface ScanNode {
  scan(cursor: string, match: string, count: number, type?: string): Promise<[string, string[]]>;
}

/** What a pub/sub connection tells the notifier. */
export interface PubSubEvents {
  /** A message arrived; its payload is the channel name as the store knows it. */
  message(payload: string): void;
  /** The connection dropped or came back: messages may have been lost meanwhile. */
  reset(): void;
}

/** The connection waiters subscribe on (one per store, created on the first wait). */
export interface PubSub {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /** Close the connection (only called for a connection the store created). */
  close(): void;
}

export interface Driver {
  readonly family: 'ioredis' | 'node-redis' | 'upstash';
  readonly isCluster: boolean;
  /** The client's own key prefix (ioredis `keyPrefix`; node-redis has none). */
  readonly keyPrefix: string;
  /**
   * Run a script with `EVALSHA`; on `NOSCRIPT` (first use on a server, or after a restart or
   * `SCRIPT FLUSH`) send it once with `EVAL`, which also caches it. `keys[0]` decides the
   * cluster node. Replies are plain: integers as numbers, strings as strings, tables as arrays.
   */
  script(
    script: Script,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown>;
  /** `GETRANGE key 0 0`: the state letter of a record, '' when there is none. */
  stateOf(key: string): Promise<string>;
  get(key: string): Promise<string | null>;
  /** The server's clock in ms (`TIME`). */
  time(): Promise<number>;
  /** The nodes to `SCAN`: the client, or a cluster's masters in a stable order. */
  nodes(): Promise<ScanNode[]>;
  /** `GETRANGE key 0 bytes-1` and `STRLEN key` of each key. */
  heads(keys: readonly string[], bytes: number): Promise<Array<[string | null, number]>>;
  /**
   * The pub/sub connection: `given` (the `subscriber` option) or a new one (a duplicate of the
   * client, connected by the driver), with `events` wired to it.
   */
  pubsub(mode: 'sharded' | 'classic', given: RedisClient | undefined, events: PubSubEvents): PubSub;
  /**
   * Whether `notifications: 'sharded'` works: false for a Cluster of a client without sharded
   * subscribers (iovalkey 0.x, an ioredis older than its `shardedSubscribers` option), whose `SSUBSCRIBE` lands on
   * one node for every slot.
   */
  readonly shardedPubSub: boolean;
  /** Appended to a store-unavailable message: what to check for this client. */
  readonly hint: string;
}

/** A client's replies as plain values (Buffers as UTF-8 strings, bigints as numbers). */
const utf8 = new TextDecoder();

export function plain(reply: unknown): unknown {
  if (reply instanceof Uint8Array) return utf8.decode(reply); // a Buffer is one
  if (typeof reply === 'bigint') return Number(reply);
  if (Array.isArray(reply)) return reply.map(plain);
  return reply;
}

/** True for the `NOSCRIPT` reply of `EVALSHA`. */
export function isNoScript(error: unknown): boolean {
  // `@upstash/redis` puts "Command failed: " before the server's reply.
  return error instanceof Error && /^(Command failed: )?NOSCRIPT/.test(error.message);
}

/** A `SCAN MATCH` pattern for keys starting with `prefix`. */
export function globPrefix(prefix: string): string {
  return prefix.replace(/[*?[\]\\]/g, '\\$&');
}
