import { DurableObject } from 'cloudflare:workers';
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  emptyStats,
  type IdempotencyRecord,
  inspectionStateOf,
  type ListedRecord,
  type StatsFilter,
  type StoreStats,
  type TakeoverInput,
} from '@idempotent-tools/core';
import {
  inspectionWhere,
  type RecordRow,
  recordFromRow,
  recordRowProblem,
  statsFromRow,
} from '@idempotent-tools/core/store-kit';
import type { Reply, ShardListFilter, ShardPage } from './protocol.js';

const TABLE = 'idempotency_records';
const COLUMNS =
  'key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, outcome, tool_name, scope, turn_id';
const LIST_COLUMNS =
  'key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, length(CAST(outcome AS BLOB)) AS outcome_bytes, tool_name, scope, turn_id';
/** The longest wait the object keeps (setTimeout's limit), whatever a caller asks. */
const MAX_WAIT_MS = 2 ** 31 - 1;
/** Cancels that arrived before their wait (another stub, another order), kept this long. */
const EARLY_CANCEL_MS = 60_000;
/** Most early cancels kept at once; the oldest go first. */
const MAX_EARLY_CANCELS = 10_000;

type Row = RecordRow & Record<string, SqlStorageValue>;

const isTime = (value: unknown): boolean => Number.isSafeInteger(value);

interface Waiter {
  key: string;
  wake: () => void;
}

/**
 * The Durable Object that keeps the records of one shard of the store in its SQLite database
 * (table `idempotency_records`). Export it from your Worker and declare it under
 * `new_sqlite_classes` in wrangler's migrations; `createDurableObjectStore(env.IDEMPOTENCY)`
 * talks to it over Workers RPC.
 *
 * A Durable Object runs one event's synchronous code at a time and its SQL calls are
 * synchronous, so every operation below is one read-modify-write that nothing can interleave
 * with: the atomic claim and the fenced writes of the store contract, with the answers of
 * `MemoryStore` (core), on the object's clock. Its output gate holds each answer until the
 * write is durable.
 */
export class IdempotencyObject extends DurableObject<unknown> {
  /** Why the object cannot keep records, when it cannot (read at start). */
  #misconfigured: string | undefined;
  /** The alarm that is set, ms since the epoch, or null: kept here so a write costs no read. */
  #alarmAt: number | null = null;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #waits = new Map<string, Waiter>();
  readonly #earlyCancels = new Map<string, number>();

  constructor(ctx: DurableObjectState, env: unknown) {
    super(ctx, env);
    void ctx.blockConcurrencyWhile(async () => {
      try {
        ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS ${TABLE} (
          key TEXT PRIMARY KEY NOT NULL,
          state TEXT NOT NULL,
          fingerprint TEXT NOT NULL,
          token TEXT NOT NULL,
          lease_expires_at INTEGER NOT NULL,
          expires_at INTEGER NOT NULL,
          created_at INTEGER NOT NULL,
          completed_at INTEGER,
          outcome TEXT,
          tool_name TEXT,
          scope TEXT,
          turn_id TEXT
        )`);
        ctx.storage.sql.exec(
          `CREATE INDEX IF NOT EXISTS ${TABLE}_expires_at ON ${TABLE} (expires_at)`,
        );
      } catch (cause) {
        this.#misconfigured = `IdempotencyObject cannot open its SQLite storage (${cause instanceof Error ? cause.message : String(cause)}). Declare the class under new_sqlite_classes (not new_classes) in a migration of your wrangler config, e.g. "migrations": [{ "tag": "v1", "new_sqlite_classes": ["IdempotencyObject"] }], then deploy again. A class created with the key-value backend cannot be converted: bind a new class name.`;
        return;
      }
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  claim(input: ClaimInput): Reply<ClaimResult> {
    return this.#run<ClaimResult>(() => {
      const now = Date.now();
      const existing = this.#live(input.key, now);
      if ('corrupt' in existing) return existing;
      const record = existing.value;
      if (record === undefined) {
        const fresh: IdempotencyRecord = {
          key: input.key,
          state: 'in_progress',
          fingerprint: input.fingerprint,
          token: input.token,
          leaseExpiresAt: now + input.leaseMs,
          expiresAt: now + Math.max(input.ttlMs, input.leaseMs),
          createdAt: now,
        };
        if (input.meta !== undefined) {
          const meta: NonNullable<IdempotencyRecord['meta']> = {};
          if (input.meta.toolName !== undefined) meta.toolName = input.meta.toolName;
          if (input.meta.scope !== undefined) meta.scope = input.meta.scope;
          if (input.meta.turnId !== undefined) meta.turnId = input.meta.turnId;
          fresh.meta = meta;
        }
        // Any row left under the key has expired: the claim replaces it.
        this.#sql(
          `INSERT OR REPLACE INTO ${TABLE} (${COLUMNS}) VALUES (?, 'in_progress', ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)`,
          fresh.key,
          fresh.fingerprint,
          fresh.token,
          fresh.leaseExpiresAt,
          fresh.expiresAt,
          now,
          input.meta?.toolName ?? null,
          input.meta?.scope ?? null,
          input.meta?.turnId ?? null,
        );
        this.#expireBy(fresh.expiresAt);
        return { value: { status: 'acquired', token: input.token, record: fresh } };
      }
      if (
        record.token === input.token &&
        record.state === 'in_progress' &&
        record.fingerprint === input.fingerprint
      ) {
        // This attempt's own claim, sent again (its reply was lost): it still owns the record.
        // A lease that ran out meanwhile is renewed, as `renew` would (nobody took over).
        if (record.leaseExpiresAt <= now) this.#extendLease(record, now, input.leaseMs);
        return { value: { status: 'acquired', token: input.token, record } };
      }
      if (record.fingerprint !== input.fingerprint) return { value: { status: 'drift', record } };
      if (record.state !== 'in_progress') return { value: { status: 'completed', record } };
      if (record.leaseExpiresAt <= now) return { value: { status: 'stale', record } };
      return { value: { status: 'in_progress', record } };
    });
  }

  complete(input: CompleteInput): Reply<boolean> {
    return this.#run(() => {
      const now = Date.now();
      const record = this.#owned(input.key, input.token, now);
      if (record === undefined) return { value: false };
      if (record.state !== 'in_progress') {
        // Already finished by this token: the same complete sent again (its reply was lost) is
        // accepted and changes nothing; another outcome is refused.
        return { value: record.state === input.state && record.outcome === input.outcome };
      }
      const expiresAt = now + input.ttlMs;
      this.#sql(
        `UPDATE ${TABLE} SET state = ?, outcome = ?, completed_at = ?, expires_at = ? WHERE key = ?`,
        input.state,
        input.outcome,
        now,
        expiresAt,
        input.key,
      );
      this.#expireBy(expiresAt);
      this.#notify(input.key);
      return { value: true };
    });
  }

  release(key: string, token: string): Reply<boolean> {
    return this.#run(() => {
      const record = this.#owned(key, token, Date.now());
      if (record === undefined || record.state !== 'in_progress') return { value: false };
      this.#sql(`DELETE FROM ${TABLE} WHERE key = ?`, key);
      this.#notify(key);
      return { value: true };
    });
  }

  renew(key: string, token: string, leaseMs: number): Reply<boolean> {
    return this.#run(() => {
      const now = Date.now();
      const record = this.#owned(key, token, now);
      if (record === undefined || record.state !== 'in_progress') return { value: false };
      this.#extendLease(record, now, leaseMs);
      return { value: true };
    });
  }

  takeover(input: TakeoverInput): Reply<boolean> {
    return this.#run(() => {
      const now = Date.now();
      const found = this.#live(input.key, now);
      const record = 'value' in found ? found.value : undefined;
      if (record === undefined || record.state !== 'in_progress') return { value: false };
      // Already taken over by this token: the same takeover sent again (its reply was lost).
      if (record.token === input.token && record.token !== input.staleToken) return { value: true };
      if (record.token !== input.staleToken || record.leaseExpiresAt > now) return { value: false };
      const expiresAt = now + Math.max(input.ttlMs, input.leaseMs);
      this.#sql(
        `UPDATE ${TABLE} SET token = ?, lease_expires_at = ?, expires_at = ? WHERE key = ?`,
        input.token,
        now + input.leaseMs,
        expiresAt,
        input.key,
      );
      this.#expireBy(expiresAt);
      return { value: true };
    });
  }

  get(key: string): Reply<IdempotencyRecord | null> {
    return this.#run(() => {
      const found = this.#live(key, Date.now());
      return 'corrupt' in found ? found : { value: found.value ?? null };
    });
  }

  /** Delete every expired row now (the alarm does it on its own); returns how many. */
  purgeExpired(): Reply<number> {
    return this.#run(() => ({ value: this.#deleteExpired(Date.now()) }));
  }

  /** One page of this shard's live records in key order, after `filter.after`. */
  list(filter: ShardListFilter): Reply<ShardPage> {
    return this.#run(() => {
      const now = Date.now();
      const { where, params } = knownStatesWhere(filter, now);
      if (filter.after !== undefined) {
        where.push('key > ?');
        params.push(filter.after);
      }
      const rows = this.#rows<Row & { outcome_bytes: number | null }>(
        `SELECT ${LIST_COLUMNS} FROM ${TABLE} WHERE ${where.join(' AND ')} ORDER BY key LIMIT ?`,
        ...params,
        filter.limit + 1,
      );
      const records: ListedRecord[] = [];
      const read = rows.slice(0, filter.limit);
      for (const row of read) {
        const { outcome_bytes, ...rest } = row;
        // A listing shows what it can read: a row this store did not write is left out.
        if (recordRowProblem({ ...rest, outcome: outcome_bytes === null ? null : '' }, isTime)) {
          continue;
        }
        const { outcome: _none, ...record } = recordFromRow(rest);
        const listed: ListedRecord = { ...record, inspectionState: inspectionStateOf(record, now) };
        if (outcome_bytes !== null) listed.outcomeBytes = outcome_bytes;
        records.push(listed);
      }
      const last = read.at(-1)?.key;
      return {
        value: {
          records,
          more: rows.length > filter.limit,
          last: typeof last === 'string' ? last : null,
        },
      };
    });
  }

  /** This shard's live records by state (one aggregate statement). */
  stats(filter: StatsFilter): Reply<StoreStats> {
    return this.#run(() => {
      const now = Date.now();
      const { where, params } = knownStatesWhere(filter, now);
      const [row] = this.#rows(
        `SELECT count(*) AS records,
           coalesce(sum(state = 'in_progress' AND lease_expires_at > ?), 0) AS in_progress,
           coalesce(sum(state = 'in_progress' AND lease_expires_at <= ?), 0) AS stale,
           coalesce(sum(state = 'completed'), 0) AS completed,
           coalesce(sum(state = 'failed'), 0) AS failed
         FROM ${TABLE} WHERE ${where.join(' AND ')}`,
        now,
        now,
        ...params,
      );
      return { value: row === undefined ? emptyStats(now) : statsFromRow(row, now) };
    });
  }

  /**
   * Resolves when the record at `key` is completed, released or deleted in this object, or after
   * `timeoutMs`. At once when the record is already finished: the change happened between the
   * caller's claim and this wait. `cancelWait(waitId)` resolves it at once.
   */
  waitForChange(key: string, timeoutMs: number, waitId: string): Promise<void> {
    if (this.#earlyCancels.delete(waitId)) return Promise.resolve();
    const found = this.#misconfigured === undefined ? this.#live(key, Date.now()) : undefined;
    const state = found !== undefined && 'value' in found ? found.value?.state : undefined;
    if (state === 'completed' || state === 'failed') return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.#waiters.get(key);
      if (set === undefined) {
        set = new Set();
        this.#waiters.set(key, set);
      }
      const waiters = set;
      const waiter: Waiter = {
        key,
        wake: () => {
          clearTimeout(timer);
          waiters.delete(waiter);
          if (waiters.size === 0 && this.#waiters.get(key) === waiters) this.#waiters.delete(key);
          this.#waits.delete(waitId);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, Math.min(Math.max(0, timeoutMs), MAX_WAIT_MS));
      waiters.add(waiter);
      this.#waits.set(waitId, waiter);
    });
  }

  /**
   * Resolve the wait `waitId` now, keeping nothing of it (the caller stopped waiting). A cancel
   * that arrives before its wait (sent through another stub) is remembered for a minute.
   */
  cancelWait(waitId: string): void {
    const waiter = this.#waits.get(waitId);
    if (waiter !== undefined) {
      waiter.wake();
      return;
    }
    const now = Date.now();
    for (const [id, at] of this.#earlyCancels) {
      if (at > now - EARLY_CANCEL_MS && this.#earlyCancels.size < MAX_EARLY_CANCELS) break;
      this.#earlyCancels.delete(id);
    }
    this.#earlyCancels.set(waitId, now);
  }

  /** The ttl: delete the expired rows, wake their waiters, set the alarm for the next expiry. */
  override alarm(): void {
    // The alarm that fired is gone; the next one is set below, or none when nothing is left.
    this.#alarmAt = null;
    if (this.#misconfigured !== undefined) return;
    const now = Date.now();
    this.#deleteExpired(now);
    const [next] = this.#rows<{ at: number | null }>(`SELECT min(expires_at) AS at FROM ${TABLE}`);
    if (next?.at != null) this.#expireBy(Math.max(next.at, now + 1));
  }

  // ---- internals ----

  /** Run one operation, unless the object has no storage to run it on. */
  #run<T>(operation: () => Reply<T>): Reply<T> {
    if (this.#misconfigured !== undefined) return { misconfigured: this.#misconfigured };
    return operation();
  }

  #sql(query: string, ...bindings: SqlStorageValue[]): void {
    this.ctx.storage.sql.exec(query, ...bindings);
  }

  #rows<T extends Record<string, SqlStorageValue>>(
    query: string,
    ...bindings: SqlStorageValue[]
  ): T[] {
    return this.ctx.storage.sql.exec<T>(query, ...bindings).toArray();
  }

  /** The live record at `key` (undefined: none), or what is wrong with its row. */
  #live(
    key: string,
    now: number,
  ): { value: IdempotencyRecord | undefined } | { corrupt: { key: string; problem: string } } {
    const [row] = this.#rows<Row>(
      `SELECT ${COLUMNS} FROM ${TABLE} WHERE key = ? AND expires_at > ?`,
      key,
      now,
    );
    if (row === undefined) return { value: undefined };
    const problem = recordRowProblem(row, isTime);
    return problem === undefined ? { value: recordFromRow(row) } : { corrupt: { key, problem } };
  }

  /** The live record at `key` if `token` owns it (a row it cannot read is owned by nobody). */
  #owned(key: string, token: string, now: number): IdempotencyRecord | undefined {
    const found = this.#live(key, now);
    const record = 'value' in found ? found.value : undefined;
    return record?.token === token ? record : undefined;
  }

  /** `renew`'s write: the lease from now, the retention at least as long. */
  #extendLease(record: IdempotencyRecord, now: number, leaseMs: number): void {
    record.leaseExpiresAt = now + leaseMs;
    if (record.expiresAt < record.leaseExpiresAt) record.expiresAt = record.leaseExpiresAt;
    this.#sql(
      `UPDATE ${TABLE} SET lease_expires_at = ?, expires_at = ? WHERE key = ?`,
      record.leaseExpiresAt,
      record.expiresAt,
      record.key,
    );
    this.#expireBy(record.expiresAt);
  }

  /** Make sure an alarm fires at or before `at` (an earlier one does too: it sets the next). */
  #expireBy(at: number): void {
    if (this.#alarmAt !== null && this.#alarmAt <= at) return;
    this.#alarmAt = at;
    // Not awaited: the output gate holds every answer until the alarm is stored, and a failed
    // write resets the object, so no answer goes out as if it were set.
    void this.ctx.storage.setAlarm(at);
  }

  /** Delete the rows expired at `now` and wake their waiters; returns how many. */
  #deleteExpired(now: number): number {
    const keys = this.ctx.storage.transactionSync(() => {
      const expired = this.#rows<{ key: string }>(
        `SELECT key FROM ${TABLE} WHERE expires_at <= ?`,
        now,
      ).map((row) => row.key);
      if (expired.length > 0) this.#sql(`DELETE FROM ${TABLE} WHERE expires_at <= ?`, now);
      return expired;
    });
    for (const key of keys) this.#notify(key);
    return keys.length;
  }

  #notify(key: string): void {
    const waiters = this.#waiters.get(key);
    if (waiters !== undefined) for (const waiter of [...waiters]) waiter.wake();
  }
}

/** The WHERE of `list` / `stats` over rows of the states this object writes. */
function knownStatesWhere(
  filter: StatsFilter & { state?: ShardListFilter['state'] },
  now: number,
): { where: string[]; params: SqlStorageValue[] } {
  const { where, params } = inspectionWhere(filter, now);
  where.push(`state IN ('in_progress', 'completed', 'failed')`);
  return { where, params };
}
