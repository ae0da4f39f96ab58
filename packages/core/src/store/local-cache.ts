/**
 * A bounded in-process cache of finished records in front of any store (issue 19): a replay of a
 * key whose finished record this process has seen (in a claim's answer, a `get`, or written by
 * its own `complete`) is answered from memory, with no round trip. Everything else passes
 * through to the store.
 *
 * Why it is safe: a finished record (`completed` or `failed`) never changes until it expires;
 * no write of the store contract touches it (`complete` by another token, `release`, `renew`,
 * `takeover` are all refused on it). The only ways it goes away are its expiry, which the cache
 * never outlives, and a deletion outside the contract (an operator deleting it in the engine, a
 * store restarted without persistence), which this process sees at the latest after the cache
 * `ttl`. An `in_progress` record is never cached.
 */
import { InvalidInputError } from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  ListFilter,
  RecordPage,
  StatsFilter,
  StoreStats,
  TakeoverInput,
} from './store.js';

export interface LocalCacheOptions {
  /**
   * Most finished records kept; past it the least recently used one is dropped. Memory is about
   * this many stored outcomes (each at most the executor's `maxResultBytes`).
   * @default 1000
   */
  maxEntries?: number;
  /**
   * How long one record is kept, in ms, counted from when the store was asked. A record deleted
   * or changed outside this process (an operator deleting it in the engine) may still be replayed
   * here for up to this long. A record read from the store is cached only when, by its own
   * `expiresAt`, it lives at least this long plus `STORE_CLOCK_MARGIN_MS` (60 s) more: the
   * store's clock (Redis, PostgreSQL) may run ahead of this process's, and a replay after the
   * record expired in the store must never come from here.
   * @default 60000
   */
  ttl?: number;
  /**
   * This process's clock, in ms since the epoch (tests pass a controllable one, the same one
   * they give the memory store).
   * @default Date.now
   */
  now?: () => number;
}

/** What the cache did so far (`localCache.stats()`). */
export interface LocalCacheStats {
  /** Finished records held now (expired ones not yet dropped included). */
  entries: number;
  /** Claims and gets answered from memory. */
  hits: number;
  /** Claims and gets sent to the store. */
  misses: number;
  /** Records dropped to stay within `maxEntries`. */
  evictions: number;
}

/** A store with a local cache in front (`withLocalCache`). */
export interface LocallyCachedStore extends IdempotencyStore {
  /** The wrapped store. */
  readonly inner: IdempotencyStore;
  readonly localCache: {
    stats(): LocalCacheStats;
    /** Drop the record of `key` from this process's cache (after deleting it in the engine). */
    delete(key: string): void;
    /** Drop every cached record. */
    clear(): void;
  };
}

const OPTION_FIELDS = ['maxEntries', 'ttl', 'now'] as const;
const DEFAULT_MAX_ENTRIES = 1000;
const DEFAULT_TTL_MS = 60_000;
const MAX_ENTRIES = 10_000_000;
/**
 * How far the store's clock may run ahead of this process's before a cached record could
 * outlive it: a record read from the store is cached only if it lives this much longer than
 * the cache keeps it.
 */
export const STORE_CLOCK_MARGIN_MS = 60_000;

interface Entry {
  /** Frozen: shared by every answer, so an outcome is opened once (see `decode`). */
  record: IdempotencyRecord;
  /** When it was cached (a clock that went back past it ends the entry). */
  since: number;
  until: number;
  /** Read from the store as it is (not built from this process's own `complete`). */
  exact: boolean;
}

/** An attempt of this process that acquired a key: its `complete` can fill the cache. */
interface Pending {
  token: string;
  record: IdempotencyRecord;
  /** When its first `complete` was sent: the record's retention counts from no earlier. */
  completeSentAt?: number;
}

function freeze(record: IdempotencyRecord): IdempotencyRecord {
  const copy = { ...record };
  if (record.meta !== undefined) copy.meta = Object.freeze({ ...record.meta });
  return Object.freeze(copy);
}

function copy(record: IdempotencyRecord): IdempotencyRecord {
  return record.meta === undefined ? { ...record } : { ...record, meta: { ...record.meta } };
}

const finished = (record: IdempotencyRecord) => record.state !== 'in_progress';

function checkWhole(field: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidInputError({
      field,
      message: `withLocalCache: ${field} must be a whole number from 1 to ${max}, got ${String(value)}.`,
    });
  }
  return value;
}

/**
 * Wrap `store` so that replays of finished records this process has seen are answered from a
 * bounded in-process LRU. Off unless you wrap: pass the result to `createIdempotency({ store })`.
 *
 * ```ts
 * const store = withLocalCache(createRedisStore(redis), { maxEntries: 10_000, ttl: 30_000 });
 * const idempotency = createIdempotency({ store });
 * ```
 *
 * Answered from memory: a `claim` of a cached key (`completed` with the same fingerprint,
 * `drift` with another one, as the store would answer) and a `get`. Every write through the
 * wrapper (`complete`, `release`, `takeover`) drops the key's entry at once; an operator's
 * `settle` through an executor over this wrapper therefore does too. Other processes' caches
 * see a deletion made outside the contract at the latest after `ttl`.
 */
export function withLocalCache(
  store: IdempotencyStore,
  options: LocalCacheOptions = {},
): LocallyCachedStore {
  if (store == null || typeof store !== 'object' || typeof store.claim !== 'function') {
    throw new InvalidInputError({
      field: 'store',
      message:
        'withLocalCache(store, options?) takes a store, e.g. withLocalCache(createMemoryStore()).',
    });
  }
  if (store.specificationVersion !== 'v1') {
    throw new InvalidInputError({
      field: 'store',
      message: `The store implements contract ${String(store.specificationVersion)}; withLocalCache needs 'v1'. Upgrade the store package.`,
    });
  }
  if (options === null || typeof options !== 'object') {
    throw new InvalidInputError({
      field: 'options',
      message: 'withLocalCache options are an object { maxEntries?, ttl? }.',
    });
  }
  const unknown = unknownOption(options, OPTION_FIELDS);
  if (unknown !== undefined) {
    throw new InvalidInputError({
      field: unknown.name,
      message: `withLocalCache: ${unknown.message}`,
    });
  }
  const maxEntries = checkWhole(
    'maxEntries',
    options.maxEntries ?? DEFAULT_MAX_ENTRIES,
    MAX_ENTRIES,
  );
  const ttl = checkWhole('ttl', options.ttl ?? DEFAULT_TTL_MS, 2 ** 31 - 1);
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidInputError({
      field: 'now',
      message: 'withLocalCache: now must be a function returning ms since the epoch.',
    });
  }
  return new LocalCacheStore(store, maxEntries, ttl, options.now ?? Date.now);
}

class LocalCacheStore implements LocallyCachedStore {
  readonly specificationVersion = 'v1' as const;
  readonly name: string;
  readonly capabilities: IdempotencyStore['capabilities'];
  readonly localCache: LocallyCachedStore['localCache'];
  readonly waitForChange?: (key: string, timeoutMs: number, signal?: AbortSignal) => Promise<void>;
  readonly purgeExpired?: () => Promise<number>;
  readonly list?: (filter?: ListFilter) => Promise<RecordPage>;
  readonly stats?: (filter?: StatsFilter) => Promise<StoreStats>;

  readonly inner: IdempotencyStore;
  readonly #maxEntries: number;
  readonly #ttl: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new Map<string, Pending>();
  #hits = 0;
  #misses = 0;
  #evictions = 0;

  constructor(inner: IdempotencyStore, maxEntries: number, ttl: number, now: () => number) {
    this.inner = inner;
    this.#maxEntries = maxEntries;
    this.#ttl = ttl;
    this.#now = now;
    this.name = inner.name;
    this.capabilities = inner.capabilities;
    // Optional operations exist exactly when the store has them (the executor and the
    // conformance suite look at which are there).
    if (inner.waitForChange) {
      this.waitForChange = (key, timeoutMs, signal) => inner.waitForChange!(key, timeoutMs, signal);
    }
    if (inner.purgeExpired) {
      this.purgeExpired = () => {
        this.#sweep();
        return inner.purgeExpired!();
      };
    }
    if (inner.list) this.list = (filter) => inner.list!(filter);
    if (inner.stats) this.stats = (filter) => inner.stats!(filter);
    this.localCache = {
      stats: () => ({
        entries: this.#entries.size,
        hits: this.#hits,
        misses: this.#misses,
        evictions: this.#evictions,
      }),
      delete: (key) => {
        this.#entries.delete(key);
      },
      clear: () => {
        this.#entries.clear();
        this.#pending.clear();
      },
    };
  }

  /** The live cached record of `key`, marked most recently used. */
  #hit(key: string, exactOnly: boolean): IdempotencyRecord | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    const now = this.#now();
    if (now < entry.since || now >= entry.until) {
      this.#entries.delete(key);
      return undefined;
    }
    if (exactOnly && !entry.exact) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.record;
  }

  /**
   * Keep a finished record seen at `askedAt` (when the store was asked). `ownClock`: its
   * `expiresAt` was computed on this process's clock (its own `complete`), else on the store's,
   * which may run ahead: then it is kept only when it outlives the cache by a margin.
   */
  #remember(record: IdempotencyRecord, askedAt: number, exact: boolean, ownClock = false): void {
    if (!finished(record) || record.outcome === undefined) return;
    let until = askedAt + this.#ttl;
    if (ownClock) until = Math.min(until, record.expiresAt);
    else if (record.expiresAt < until + STORE_CLOCK_MARGIN_MS) return;
    const now = this.#now();
    if (until <= now || now < askedAt) return;
    this.#entries.delete(record.key);
    this.#entries.set(record.key, { record: freeze(record), since: askedAt, until, exact });
    this.#evict(this.#entries, true);
  }

  #evict(map: Map<string, unknown>, count: boolean): void {
    while (map.size > this.#maxEntries) {
      const oldest = map.keys().next().value as string;
      map.delete(oldest);
      if (count) this.#evictions++;
    }
  }

  #sweep(): void {
    const now = this.#now();
    for (const [key, entry] of this.#entries) {
      if (now < entry.since || now >= entry.until) this.#entries.delete(key);
    }
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    const record = this.#hit(input.key, false);
    if (record !== undefined) {
      this.#hits++;
      // What the store answers for a finished record: its fingerprint decides.
      return record.fingerprint === input.fingerprint
        ? { status: 'completed', record }
        : { status: 'drift', record };
    }
    this.#misses++;
    const askedAt = this.#now();
    const answer = await this.inner.claim(input);
    if (answer.status === 'completed' || answer.status === 'drift') {
      this.#remember(answer.record, askedAt, true);
    } else if (answer.status === 'acquired') {
      this.#pending.delete(input.key);
      this.#pending.set(input.key, { token: input.token, record: answer.record });
      this.#evict(this.#pending, false);
    }
    return answer;
  }

  async complete(input: CompleteInput): Promise<boolean> {
    this.#entries.delete(input.key);
    const pending = this.#pending.get(input.key);
    const own = pending !== undefined && pending.token === input.token ? pending : undefined;
    if (own !== undefined) own.completeSentAt ??= this.#now();
    const done = await this.inner.complete(input);
    if (own !== undefined && this.#pending.get(input.key) === own) {
      this.#pending.delete(input.key);
      if (done) {
        // The store counts the retention from when the first `complete` reached it: no sooner
        // than it was sent (a `complete` sent again does not extend it).
        const sentAt = own.completeSentAt as number;
        this.#remember(
          {
            ...own.record,
            state: input.state,
            outcome: input.outcome,
            completedAt: sentAt,
            expiresAt: sentAt + input.ttlMs,
          },
          sentAt,
          false,
          true,
        );
      }
    }
    return done;
  }

  async release(key: string, token: string): Promise<boolean> {
    this.#entries.delete(key);
    if (this.#pending.get(key)?.token === token) this.#pending.delete(key);
    return this.inner.release(key, token);
  }

  renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    return this.inner.renew(key, token, leaseMs);
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    this.#entries.delete(input.key);
    this.#pending.delete(input.key);
    return this.inner.takeover(input);
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const cached = this.#hit(key, true);
    if (cached !== undefined) {
      this.#hits++;
      return copy(cached);
    }
    this.#misses++;
    const askedAt = this.#now();
    const record = await this.inner.get(key);
    if (record !== undefined) this.#remember(record, askedAt, true);
    return record;
  }

  async close(): Promise<void> {
    this.#entries.clear();
    this.#pending.clear();
    await this.inner.close?.();
  }
}
