import {
  checkListFilter,
  checkStatsFilter,
  countRecord,
  decodeCursor,
  emptyStats,
  encodeCursor,
  inspectionStateOf,
  matchesFilter,
  toListedRecord,
} from './inspection.js';
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

/** A copy the caller may change without touching the stored record. */
function copy(record: IdempotencyRecord): IdempotencyRecord {
  return record.meta === undefined ? { ...record } : { ...record, meta: { ...record.meta } };
}

export interface MemoryStoreOptions {
  /**
   * The clock, in milliseconds since the epoch. Tests pass a controllable one.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Sweep expired records when the store grows past this many entries; the threshold then
   * doubles with the live size, so sweeping costs O(1) amortised per write and memory stays
   * bounded by the live records.
   * @default 1024
   */
  sweepThreshold?: number;
}

/**
 * The in-memory store: one process, no durability. For tests, development and single-process
 * agents that can lose their records on restart. Every operation is synchronous inside, so it is
 * atomic.
 *
 * ```ts
 * const store = createMemoryStore();
 * ```
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new MemoryStore(options);
}

export class MemoryStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'memory';
  readonly capabilities = { notifiesChanges: true, durable: false };

  readonly #records = new Map<string, IdempotencyRecord>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #now: () => number;
  readonly #minSweep: number;
  #nextSweep: number;

  constructor(options: MemoryStoreOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#minSweep = options.sweepThreshold ?? 1024;
    this.#nextSweep = this.#minSweep;
  }

  /** Number of records held, expired ones not yet swept included. */
  get size(): number {
    return this.#records.size;
  }

  #live(key: string, now: number): IdempotencyRecord | undefined {
    const record = this.#records.get(key);
    if (record === undefined) return undefined;
    if (record.expiresAt <= now) {
      this.#records.delete(key);
      return undefined;
    }
    return record;
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    const now = this.#now();
    const existing = this.#live(input.key, now);
    if (existing === undefined) {
      const record: IdempotencyRecord = {
        key: input.key,
        state: 'in_progress',
        fingerprint: input.fingerprint,
        token: input.token,
        leaseExpiresAt: now + input.leaseMs,
        expiresAt: now + Math.max(input.ttlMs, input.leaseMs),
        createdAt: now,
      };
      if (input.meta !== undefined) record.meta = { ...input.meta };
      this.#records.set(input.key, record);
      this.#maybeSweep(now);
      return { status: 'acquired', token: input.token, record: copy(record) };
    }
    if (
      existing.token === input.token &&
      existing.state === 'in_progress' &&
      existing.fingerprint === input.fingerprint
    ) {
      // This attempt's own claim, sent again (its reply was lost): it still owns the record. A
      // lease that ran out meanwhile is renewed, as `renew` would (nobody took over).
      if (existing.leaseExpiresAt <= now) this.#extendLease(existing, now, input.leaseMs);
      return { status: 'acquired', token: input.token, record: copy(existing) };
    }
    const record = copy(existing);
    if (existing.fingerprint !== input.fingerprint) return { status: 'drift', record };
    if (existing.state !== 'in_progress') return { status: 'completed', record };
    if (existing.leaseExpiresAt <= now) return { status: 'stale', record };
    return { status: 'in_progress', record };
  }

  async complete(input: CompleteInput): Promise<boolean> {
    const now = this.#now();
    const record = this.#live(input.key, now);
    if (record === undefined || record.token !== input.token) return false;
    if (record.state !== 'in_progress') {
      // Already finished by this token: the same complete sent again (its reply was lost) is
      // accepted and changes nothing; another outcome is refused.
      return record.state === input.state && record.outcome === input.outcome;
    }
    record.state = input.state;
    record.outcome = input.outcome;
    record.completedAt = now;
    record.expiresAt = now + input.ttlMs;
    this.#notify(input.key);
    return true;
  }

  async release(key: string, token: string): Promise<boolean> {
    const record = this.#live(key, this.#now());
    if (record === undefined || record.token !== token || record.state !== 'in_progress') {
      return false;
    }
    this.#records.delete(key);
    this.#notify(key);
    return true;
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    const now = this.#now();
    const record = this.#live(key, now);
    if (record === undefined || record.token !== token || record.state !== 'in_progress') {
      return false;
    }
    this.#extendLease(record, now, leaseMs);
    return true;
  }

  #extendLease(record: IdempotencyRecord, now: number, leaseMs: number): void {
    record.leaseExpiresAt = now + leaseMs;
    if (record.expiresAt < record.leaseExpiresAt) record.expiresAt = record.leaseExpiresAt;
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    const now = this.#now();
    const record = this.#live(input.key, now);
    if (record === undefined || record.state !== 'in_progress') return false;
    // Already taken over by this token: the same takeover sent again (its reply was lost).
    if (record.token === input.token && record.token !== input.staleToken) return true;
    if (record.token !== input.staleToken || record.leaseExpiresAt > now) {
      return false;
    }
    record.token = input.token;
    record.leaseExpiresAt = now + input.leaseMs;
    record.expiresAt = now + Math.max(input.ttlMs, input.leaseMs);
    return true;
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    const record = this.#live(key, this.#now());
    return record === undefined ? undefined : copy(record);
  }

  waitForChange(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.#waiters.get(key);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(key, set);
      }
      const waiters = set;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(key) === waiters) this.#waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      waiters.add(done);
    });
  }

  async purgeExpired(): Promise<number> {
    return this.#sweep(this.#now());
  }

  /** Live records in key order, without outcomes. O(records) per page. */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    const after =
      checked.cursor === undefined
        ? undefined
        : decodeCursor(checked.cursor, (v) => (typeof v === 'string' ? v : undefined));
    const now = this.#now();
    const keys: string[] = [];
    for (const [key, record] of this.#records) {
      if (record.expiresAt <= now || (after !== undefined && key <= after)) continue;
      if (matchesFilter(record, checked, now)) keys.push(key);
    }
    keys.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const page = keys.slice(0, checked.limit);
    const records = page.map((key) => toListedRecord(this.#records.get(key)!, now));
    const last = page.at(-1);
    return keys.length > checked.limit && last !== undefined
      ? { records, cursor: encodeCursor(last) }
      : { records };
  }

  /** Live records by state. O(records). */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    const now = this.#now();
    const stats = emptyStats(now);
    for (const record of this.#records.values()) {
      if (record.expiresAt <= now || !matchesFilter(record, checked, now)) continue;
      countRecord(stats, inspectionStateOf(record, now));
    }
    return stats;
  }

  async close(): Promise<void> {
    for (const key of [...this.#waiters.keys()]) this.#notify(key);
  }

  #notify(key: string): void {
    const waiters = this.#waiters.get(key);
    if (waiters === undefined) return;
    for (const wake of [...waiters]) wake();
  }

  #maybeSweep(now: number): void {
    if (this.#records.size < this.#nextSweep) return;
    this.#sweep(now);
    this.#nextSweep = Math.max(this.#minSweep, this.#records.size * 2);
  }

  #sweep(now: number): number {
    let removed = 0;
    for (const [key, record] of this.#records) {
      if (record.expiresAt <= now) {
        this.#records.delete(key);
        removed++;
      }
    }
    return removed;
  }
}
