import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  checkListFilter,
  checkStatsFilter,
  checkStoreText,
  checkStoreTimeout,
  countRecord,
  decodeCursor,
  emptyStats,
  encodeCursor,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
  matchesFilter,
  RecordIntegrityError,
  type RecordMeta,
  type RecordPage,
  reasonOf,
  type StatsFilter,
  type StoreCapabilities,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
  withDeadline,
} from '@idempotent-tools/core';
import { checkOneOf, checkWholeNumber, InFlight } from '@idempotent-tools/core/store-kit';
import { type Driver, globPrefix, type RedisClient } from './driver.js';
import { Notifier } from './notifier.js';
import { SCRIPTS, type Script } from './scripts.js';
import { toDriver } from './to-driver.js';

export type {
  IoRedisLikeClient,
  NodeRedisLikeClient,
  RedisClient,
  UpstashLikeClient,
} from './driver.js';

export interface RedisStoreOptions {
  /**
   * Prepended to every record key and channel name: records live at `<prefix>{<key>}`. The
   * braces are a Cluster hash tag, so every operation touches one slot. 1 to 100 printable ASCII
   * characters without `{` or `}`. Different apps (or environments) sharing one Redis use
   * different prefixes.
   * @default 'idem:'
   */
  prefix?: string;
  /**
   * How waiting callers learn that a running duplicate finished, across processes:
   * - `'sharded'`: `SPUBLISH`/`SSUBSCRIBE` (Redis 7+). The channel lives on the record's shard,
   *   so it scales with a Cluster. A Cluster subscriber needs `shardedSubscribers: true` (the
   *   store sets it on the connection it creates).
   * - `'classic'`: `PUBLISH`/`SUBSCRIBE`, for Redis 5 and 6 (on a Cluster every message is
   *   broadcast to every node).
   * - `'off'`: no pub/sub; waiting callers poll (2 ms doubling to 100 ms) and
   *   `capabilities.notifiesChanges` is false. The only choice for `@upstash/redis` (REST).
   * @default 'sharded' ('off' for `@upstash/redis`)
   */
  notifications?: 'sharded' | 'classic' | 'off';
  /**
   * The connection waiters subscribe on. By default the store creates one with
   * `redis.duplicate()` on the first wait (ioredis: with `shardedSubscribers: true` for a
   * Cluster in `'sharded'` mode; node-redis: connected by the store) and closes it in `close()`.
   * A connection you pass is never closed by the store; it must be of the same client family as
   * `redis`, dedicated to subscriptions, connected (node-redis) and use the same `keyPrefix`
   * (ioredis).
   * @default undefined (a duplicate of `redis`, created lazily)
   */
  subscriber?: RedisClient;
  /**
   * Longest a waiter sleeps on a subscription before it looks at the record again. Pub/sub is
   * at-most-once (a message sent while the subscriber reconnects is lost), so this bounds the
   * delay a lost message can cause.
   * @default 1000
   */
  maxWaitMs?: number;
  /**
   * Declare the records durable (`capabilities.durable`). Redis keeps them in memory only unless
   * it runs with `appendonly yes` (and `appendfsync everysec` or `always`): set this to true only
   * then. See the README.
   * @default false
   */
  durable?: boolean;
  /**
   * Longest one store operation may take, in ms, whatever the client's own retry settings
   * (ioredis re-sends a command up to `maxRetriesPerRequest` times with back-off, and queues it
   * while offline): then it fails with `StoreUnavailableError`. The command may still land later,
   * which every operation allows for (each is safe to send again).
   * @default 5000
   */
  timeoutMs?: number;
}

/** Escape `%`, tab and newline: a token or fingerprint in the header line of a record. */
function escapeField(text: string): string {
  return /[%\t\n]/.test(text)
    ? text.replace(/[%\t\n]/g, (c) => (c === '%' ? '%25' : c === '\t' ? '%09' : '%0A'))
    : text;
}

function unescapeField(text: string): string {
  return text.includes('%')
    ? text.replace(/%(25|09|0A)/g, (_, code: string) =>
        code === '25' ? '%' : code === '09' ? '\t' : '\n',
      )
    : text;
}

const STATES = { P: 'in_progress', C: 'completed', F: 'failed' } as const;

/**
 * The record in a stored value (see `scripts.ts`): a header line
 * `S lease expires created completed token fingerprint meta` (tab-separated), then the outcome.
 * `headerOnly`: the value may be cut after the header (inspection), no outcome is read.
 */
function toRecord(key: string, value: unknown, headerOnly = false): IdempotencyRecord {
  const text = typeof value === 'string' ? value : '';
  const end = text.indexOf('\n');
  const fields = (end < 0 ? '' : text.slice(0, end)).split('\t');
  const state = STATES[fields[0] as keyof typeof STATES];
  if (
    state === undefined ||
    fields.length !== 8 ||
    !fields.slice(1, 4).every((f) => TIME.test(f)) ||
    (state === 'in_progress' ? fields[4] !== '' : !TIME.test(fields[4]!))
  ) {
    throw new Error(`the value at ${key} is not a record of this store`);
  }
  const record: IdempotencyRecord = {
    key,
    state,
    fingerprint: unescapeField(fields[6]!),
    token: unescapeField(fields[5]!),
    leaseExpiresAt: Number(fields[1]),
    expiresAt: Number(fields[2]),
    createdAt: Number(fields[3]),
  };
  if (state !== 'in_progress') {
    record.completedAt = Number(fields[4]);
    if (!headerOnly) record.outcome = text.slice(end + 1);
  }
  if (fields[7] !== '') record.meta = toMeta(fields[7]!);
  return record;
}

/** Milliseconds in a record header. */
const TIME = /^\d{1,16}$/;

/** The meta JSON of a record header (an object), else it is not a record. */
function toMeta(json: string): RecordMeta {
  const parsed = JSON.parse(json) as unknown;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error('the meta of the record is not a JSON object');
  }
  return parsed as RecordMeta;
}

/** A copy of the meta a claim stores (what reading it back would give). */
function copyMeta(meta: RecordMeta): RecordMeta {
  const copy: RecordMeta = {};
  if (meta.toolName !== undefined) copy.toolName = meta.toolName;
  if (meta.scope !== undefined) copy.scope = meta.scope;
  if (meta.turnId !== undefined) copy.turnId = meta.turnId;
  return copy;
}

/** Bytes of a value `list` reads: the header fits in them unless the meta is long. */
const HEADER_BYTES = 1024;

/** Where a listing stands: node index, `SCAN` cursor, keys found but not returned yet. */
interface ScanPosition {
  n: number;
  c: string;
  p: string[];
}

function toScanPosition(value: unknown): ScanPosition | undefined {
  const v = value as Partial<ScanPosition> | null;
  if (
    v === null ||
    typeof v !== 'object' ||
    !Number.isSafeInteger(v.n) ||
    (v.n as number) < 0 ||
    typeof v.c !== 'string' ||
    !/^\d+$/.test(v.c) ||
    !Array.isArray(v.p) ||
    !v.p.every((k) => typeof k === 'string')
  ) {
    return undefined;
  }
  return { n: v.n as number, c: v.c, p: v.p };
}

const PREFIX = /^[\x20-\x7a\x7c\x7e]{1,100}$/; // printable ASCII without { and }

/**
 * The Redis store, single node or Cluster: the fast path. Takes the client you already have:
 * ioredis or iovalkey (`new Redis(url)`, `new Redis.Cluster([...])`), or node-redis
 * (`redis` / `@redis/client` 5 and 6: a connected `createClient()` or `createCluster()`); the
 * client family is recognised from the client. One Lua script per operation, run with `EVALSHA`
 * (falling back to `EVAL` once per server). A replay is one round trip (the claim returns the
 * whole record), a fresh call two (claim, complete).
 *
 * ```ts
 * const store = createRedisStore(new Redis(process.env.REDIS_URL)); // ioredis, iovalkey
 * const store = createRedisStore(await createClient({ url }).connect()); // node-redis
 * const idempotency = createIdempotency({ store });
 * ```
 */
export function createRedisStore(redis: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  return new RedisStore(redis, options);
}

export class RedisStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'redis';
  readonly capabilities: StoreCapabilities;
  /** The prefix of every record key: records live at `<prefix>{<key>}`. */
  readonly prefix: string;
  /** Present unless `notifications: 'off'`. */
  readonly waitForChange?: (key: string, timeoutMs: number, signal?: AbortSignal) => Promise<void>;

  readonly #driver: Driver;
  readonly #mode: 's' | 'c' | '';
  readonly #notifier: Notifier | undefined;
  readonly #ownsSubscriber: boolean;
  readonly #timeoutMs: number;
  /** The claim in flight per key (see `claim`). */
  readonly #claiming = new InFlight<unknown>();

  constructor(redis: RedisClient, options: RedisStoreOptions = {}) {
    const driver = toDriver(redis);
    if (
      options.subscriber !== undefined &&
      toDriver(options.subscriber, 'subscriber').family !== driver.family
    ) {
      throw new InvalidInputError({
        field: 'subscriber',
        message: `subscriber must be a client of the same family as redis (${driver.family}): a dedicated connection, e.g. redis.duplicate().`,
      });
    }
    // Over REST (Upstash) there is no connection to subscribe on: waiters poll.
    const rest = driver.family === 'upstash';
    const {
      prefix = 'idem:',
      notifications = rest ? 'off' : 'sharded',
      maxWaitMs = 1000,
    } = options;
    this.#timeoutMs = checkStoreTimeout('createRedisStore', options.timeoutMs);
    if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
      throw new InvalidInputError({
        field: 'prefix',
        message: `prefix must be 1 to 100 printable ASCII characters without { or } (they would break the Cluster hash tag), got ${JSON.stringify(prefix)}.`,
      });
    }
    checkOneOf('notifications', notifications, ['sharded', 'classic', 'off']);
    checkWholeNumber('maxWaitMs', maxWaitMs, 1);
    if (rest && (notifications !== 'off' || options.subscriber !== undefined)) {
      throw new InvalidInputError({
        field: notifications !== 'off' ? 'notifications' : 'subscriber',
        message:
          "@upstash/redis sends each command as one HTTPS request and keeps no connection to subscribe on: leave notifications out (or pass 'off': waiters poll, 2 ms doubling to 100 ms) and pass no subscriber.",
      });
    }
    if (notifications === 'sharded' && !driver.shardedPubSub) {
      throw new InvalidInputError({
        field: 'notifications',
        message:
          "This Cluster client has no sharded subscribers (iovalkey's Cluster, or an ioredis older than its `shardedSubscribers` Cluster option), so notifications: 'sharded' cannot subscribe on each record's shard. Pass notifications: 'classic' (PUBLISH/SUBSCRIBE, broadcast to every node) or 'off' (waiters poll), or use a current ioredis or node-redis createCluster.",
      });
    }
    this.#driver = driver;
    this.prefix = prefix;
    this.capabilities = {
      notifiesChanges: notifications !== 'off',
      durable: options.durable === true,
    };
    this.#mode = notifications === 'sharded' ? 's' : notifications === 'classic' ? 'c' : '';
    this.#ownsSubscriber = options.subscriber === undefined;
    if (notifications !== 'off') {
      const given = options.subscriber;
      const notifier = new Notifier({
        maxWaitMs,
        subscriber: (events) => driver.pubsub(notifications, given, events),
        // Finished (completed or failed). A missing record is not taken as a change: a wait
        // on a key nobody claimed lasts its timeout; a release just before the subscription
        // costs at most maxWaitMs.
        settled: async (key) => {
          const state = await driver.stateOf(this.#recordKey(key));
          return state === 'C' || state === 'F';
        },
      });
      this.#notifier = notifier;
      this.waitForChange = (key, timeoutMs, signal) =>
        notifier.wait(key, this.#channel(key), Math.max(0, timeoutMs), signal);
    }
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    const { key, fingerprint, token, leaseMs, ttlMs, meta } = input;
    checkStoreText('key', key);
    checkStoreText('meta.toolName', meta?.toolName);
    checkStoreText('meta.scope', meta?.scope);
    checkStoreText('meta.turnId', meta?.turnId);
    // A claim of this key already on its way: if it finds a finished record, that is this
    // claim's answer too (a finished record never changes; only its expiry or a deletion ends
    // it). Waiters woken together (a same-key storm) then cost one round trip per process.
    const shared = this.#claiming.has(key) ? await this.#claiming.answer(key) : undefined;
    let reply: unknown;
    if (typeof shared === 'string') {
      reply = shared;
    } else {
      const sent = this.#run('claim', key, SCRIPTS.claim, false, [
        escapeField(fingerprint),
        escapeField(token),
        leaseMs,
        ttlMs,
        meta === undefined ? '' : JSON.stringify(meta),
      ]);
      reply = await this.#claiming.track(key, sent);
    }
    if (typeof reply === 'number') {
      // Acquired: the script stored exactly this record and replied with its clock only.
      const record: IdempotencyRecord = {
        key,
        state: 'in_progress',
        fingerprint,
        token,
        leaseExpiresAt: reply + leaseMs,
        expiresAt: reply + Math.max(ttlMs, leaseMs),
        createdAt: reply,
      };
      if (meta !== undefined) record.meta = copyMeta(meta);
      return { status: 'acquired', token, record };
    }
    if (typeof reply === 'string') {
      // A finished record (its key exists, so it is live).
      const record = this.#decode(key, reply);
      return record.fingerprint !== fingerprint
        ? { status: 'drift', record }
        : { status: 'completed', record };
    }
    const [now, value] = reply as [number, string];
    const record = this.#decode(key, value);
    if (record.fingerprint !== fingerprint) return { status: 'drift', record };
    if (record.state !== 'in_progress') return { status: 'completed', record };
    // This attempt's own claim, sent again (the reply of the first was lost, or ioredis re-sent
    // it after a reconnect): it owns the record (the script renewed a lease that ran out).
    if (record.token === token) return { status: 'acquired', token, record };
    return record.leaseExpiresAt <= now
      ? { status: 'stale', record }
      : { status: 'in_progress', record };
  }

  async complete(input: CompleteInput): Promise<boolean> {
    const { key, token, state, outcome, ttlMs } = input;
    checkStoreText('outcome', outcome);
    const args = [escapeField(token), state === 'failed' ? 'F' : 'C', outcome, ttlMs];
    args.push(this.#mode, this.#channel(key));
    return (await this.#run('complete', key, SCRIPTS.complete, true, args)) === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    const args = [escapeField(token), this.#mode, this.#channel(key)];
    return (await this.#run('release', key, SCRIPTS.release, true, args)) === 1;
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    const args = [escapeField(token), leaseMs];
    return (await this.#run('renew', key, SCRIPTS.renew, false, args)) === 1;
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    const { key, staleToken, token, leaseMs, ttlMs } = input;
    const args = [escapeField(staleToken), escapeField(token), leaseMs, ttlMs];
    return (await this.#run('takeover', key, SCRIPTS.takeover, false, args)) === 1;
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const [now, value] = (await this.#run('get', key, SCRIPTS.get, false, [])) as [number, unknown];
    if (value === undefined) return undefined;
    const record = this.#decode(key, value);
    return record.expiresAt > now ? record : undefined;
  }

  /**
   * Not needed in normal operation: Redis expires every record itself (its key's TTL is the
   * record's `expiresAt`). This walks the prefix with `SCAN` on every (master) node, which also
   * makes Redis drop expired keys at once, deletes records whose TTL was removed by hand once
   * they are past `expiresAt`, and returns how many of those it deleted (Redis does not report
   * the keys it expires itself). Cost: O(records under the prefix).
   */
  async purgeExpired(): Promise<number> {
    const driver = this.#driver;
    const kp = driver.keyPrefix;
    try {
      let removed = 0;
      for await (const keys of scanDriver(driver, `${kp}${this.prefix}`, 'string')) {
        const results = await Promise.all(
          keys.map((key) => driver.script(SCRIPTS.purge, [key.slice(kp.length)], [])),
        );
        for (const result of results) removed += Number(result);
      }
      return removed;
    } catch (cause) {
      throw this.#unavailable('purgeExpired', undefined, cause);
    }
  }

  /**
   * Inspection, admin only: `SCAN` over the prefix (on every master of a Cluster) and `HMGET` +
   * `HSTRLEN` per key in pipelines, filtered in the client. **O(records under the prefix)** per
   * full listing, whatever the filter; never call it on a hot path. Order is `SCAN`'s; a record
   * live for the whole listing is returned at least once (`SCAN`'s guarantee), and a record may
   * show up twice if Redis rehashes meanwhile.
   */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    let position: ScanPosition =
      checked.cursor === undefined
        ? { n: 0, c: '0', p: [] }
        : decodeCursor(checked.cursor, toScanPosition);
    try {
      const nodes = await this.#driver.nodes();
      const now = await this.#driver.time();
      const records: ListedRecord[] = [];
      const count = Math.max(100, checked.limit);
      for (;;) {
        if (position.p.length > 0) {
          const matched = (await this.#fetch(position.p, now)).filter(
            ([, record]) => record !== undefined && matchesFilter(record, checked, now),
          );
          const room = checked.limit - records.length;
          for (const [, record] of matched.slice(0, room)) records.push(record!);
          const left = matched.slice(room).map(([raw]) => raw);
          position = { ...position, p: left };
          if (left.length > 0) return { records, cursor: encodeCursor(position) };
        }
        if (position.n >= nodes.length) return { records };
        if (records.length >= checked.limit) return { records, cursor: encodeCursor(position) };
        const node = nodes[position.n]!;
        const [next, keys] = await node.scan(position.c, this.#match(), count, 'string');
        position =
          next === '0' ? { n: position.n + 1, c: '0', p: keys } : { ...position, c: next, p: keys };
      }
    } catch (cause) {
      throw this.#unavailable('list', undefined, cause);
    }
  }

  /** Inspection, admin only: live records by state. **O(records under the prefix)** (`SCAN`). */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    try {
      const now = await this.#driver.time();
      const stats = emptyStats(now);
      for (const node of await this.#driver.nodes()) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, this.#match(), 1000, 'string');
          cursor = next;
          for (const [, record] of await this.#fetch(keys, now)) {
            if (record !== undefined && matchesFilter(record, checked, now)) {
              countRecord(stats, record.inspectionState);
            }
          }
        } while (cursor !== '0');
      }
      return stats;
    } catch (cause) {
      throw this.#unavailable('stats', undefined, cause);
    }
  }

  /** Wake pending waiters and close the subscriber connection the store created. */
  async close(): Promise<void> {
    const subscriber = this.#notifier?.close();
    if (subscriber !== undefined && this.#ownsSubscriber) subscriber.close();
  }

  /** `SCAN MATCH` pattern of this store's records (client `keyPrefix` included). */
  #match(): string {
    return `${globPrefix(`${this.#driver.keyPrefix}${this.prefix}`)}{*`;
  }

  /**
   * Read the records at raw keys (as `SCAN` returns them), without their outcomes. Missing,
   * expired or foreign values come back undefined.
   */
  async #fetch(
    rawKeys: readonly string[],
    now: number,
  ): Promise<Array<[string, ListedRecord | undefined]>> {
    if (rawKeys.length === 0) return [];
    const kp = this.#driver.keyPrefix;
    const keys = rawKeys.map((raw) => raw.slice(kp.length));
    const replies = await this.#driver.heads(keys, HEADER_BYTES);
    // A header longer than HEADER_BYTES (a long meta): read the whole value.
    for (const [i, [head, bytes]] of replies.entries()) {
      if (head !== null && bytes > HEADER_BYTES && !head.includes('\n')) {
        replies[i] = [await this.#driver.get(keys[i]!), bytes];
      }
    }
    return rawKeys.map((raw, i) => {
      const [head, bytes] = replies[i]!;
      const key = keys[i]!.slice(this.prefix.length + 1, -1);
      let record: IdempotencyRecord;
      try {
        record = toRecord(key, head, true);
      } catch {
        return [raw, undefined]; // gone meanwhile, or not a record of this store
      }
      if (!(record.expiresAt > now)) return [raw, undefined];
      const listed: ListedRecord = { ...record, inspectionState: inspectionStateOf(record, now) };
      if (record.state !== 'in_progress') {
        const header = (head as string).slice(0, (head as string).indexOf('\n') + 1);
        listed.outcomeBytes = bytes - new TextEncoder().encode(header).length;
      }
      return [raw, listed];
    });
  }

  #recordKey(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  #channel(key: string): string {
    return `${this.prefix}{${key}}:changed`;
  }

  async #run(
    what: string,
    key: string,
    script: Script,
    withChannel: boolean,
    args: readonly (string | number)[],
  ): Promise<unknown> {
    const keys = [this.#recordKey(key)];
    if (withChannel) keys.push(this.#channel(key));
    try {
      return await withDeadline(
        this.#driver.script(script, keys, args),
        this.#timeoutMs,
        () => new Error(`no answer within ${this.#timeoutMs} ms (timeoutMs)`),
      );
    } catch (cause) {
      // Another type of value under the record's key (a hash, a list): not a record of ours.
      if (cause instanceof Error && /\bWRONGTYPE\b/.test(cause.message)) {
        throw this.#corrupt(what, key, cause);
      }
      throw this.#unavailable(what, key, cause);
    }
  }

  #decode(key: string, value: unknown): IdempotencyRecord {
    try {
      return toRecord(key, value);
    } catch (cause) {
      throw this.#corrupt('decode', key, cause);
    }
  }

  /**
   * The value under a record's key is not a record this store wrote. Redis answered, so this is
   * no outage (never `StoreUnavailableError`, which `onStoreUnavailable: 'fail-open'` would run
   * the tool unguarded on): the call fails, nothing runs, until someone looks at the value.
   */
  #corrupt(what: string, key: string, cause: unknown): RecordIntegrityError {
    const raw = `${this.#driver.keyPrefix}${this.#recordKey(key)}`;
    const reason = reasonOf(cause);
    return new RecordIntegrityError({
      key,
      cause,
      reason: 'corrupt',
      message: `The Redis idempotency store found a value at ${JSON.stringify(raw)} that is not a record of this store (${what}: ${reason}). It was not replayed and the tool did not run. Inspect it (GET / TYPE ${JSON.stringify(raw)}) and delete it (DEL), then retry the call; check that nothing else writes under the store's prefix ${JSON.stringify(this.prefix)}.`,
    });
  }

  #unavailable(what: string, key: string | undefined, cause: unknown): StoreUnavailableError {
    const reason = reasonOf(cause);
    return new StoreUnavailableError({
      key,
      cause,
      message: `The Redis idempotency store failed during ${what}: ${reason}. Nothing ran; check that Redis is up and reachable, then retry the same call.${this.#driver.hint}`,
    });
  }
}

/** `SCAN` for keys starting with `prefix` on the client, or on every master of a cluster. */
export function scanKeys(
  redis: RedisClient,
  prefix: string,
  type?: string,
): AsyncGenerator<string[]> {
  return scanDriver(toDriver(redis), prefix, type);
}

async function* scanDriver(
  driver: Driver,
  prefix: string,
  type?: string,
): AsyncGenerator<string[]> {
  const match = `${globPrefix(prefix)}*`;
  for (const node of await driver.nodes()) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, match, 1000, type);
      cursor = next;
      if (keys.length > 0) yield keys;
    } while (cursor !== '0');
  }
}
