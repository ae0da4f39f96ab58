/**
 * `@idempotent-tools/core/store-kit`: what the bundled stores (Redis, PostgreSQL, SQLite,
 * DynamoDB) share beyond the store contract, implemented once: option checks, the claim in flight
 * per key, records and pages of SQL rows, and the batched audit log the SQL stores build theirs
 * on. For store authors, not for apps.
 */

import { InvalidInputError, StoreUnavailableError } from '../errors/index.js';
import {
  type AuditLog,
  type AuditPage,
  type AuditQuery,
  type AuditRow,
  type AuditStats,
  type AuditStatsFilter,
  auditEntryFromRow,
  auditStatsFrom,
  DEFAULT_AUDIT_RETENTION_MS,
} from '../observe/audit.js';
import { type BatchedSink, createBatchedSink } from '../observe/batched-sink.js';
import type { EventHandler, IdempotencyEvent } from '../observe/events.js';
import { decodeCursor, encodeCursor } from './inspection.js';
import type { IdempotencyRecord, RecordMeta, StatsFilter, StoreStats } from './store.js';

// ---- options ----

/**
 * Check a whole-number option (`InvalidInputError` naming `field` otherwise): at least `min`, at
 * most `max` when given. Returns it.
 */
export function checkWholeNumber(field: string, value: unknown, min: number, max?: number): number {
  if (
    typeof value !== 'number' ||
    !Number.isSafeInteger(value) ||
    value < min ||
    (max !== undefined && value > max)
  ) {
    const range = max === undefined ? `>= ${min}` : `between ${min} and ${max}`;
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number ${range}, got ${String(value)}.`,
    });
  }
  return value;
}

/** Check an option that takes one of `allowed` (`InvalidInputError` naming `field` otherwise). */
export function checkOneOf<const T extends string>(
  field: string,
  value: unknown,
  allowed: readonly T[],
): T {
  if (!allowed.includes(value as T)) {
    const quoted = allowed.map((a) => `'${a}'`);
    const choices = `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
    throw new InvalidInputError({
      field,
      message: `${field} must be ${choices}, got ${String(value)}.`,
    });
  }
  return value as T;
}

/** The `now` option of a store: a clock in ms since the epoch, `Date.now` when left out. */
export function checkClock(now: unknown): () => number {
  if (now === undefined) return Date.now;
  if (typeof now !== 'function') {
    throw new InvalidInputError({
      field: 'now',
      message: 'now must be a function returning ms since the epoch (default Date.now).',
    });
  }
  return now as () => number;
}

// ---- the claim in flight ----

/**
 * The request in flight per key of one store (its claim), so that a request of the same key made
 * meanwhile in this process can take its answer instead of sending its own: a same-key storm
 * (waiters woken together) then costs one round trip per process.
 */
export class InFlight<T> {
  readonly #pending = new Map<string, Promise<T>>();

  /** Whether a request of `key` is in flight. */
  has(key: string): boolean {
    return this.#pending.has(key);
  }

  /** What the request in flight for `key` answers, undefined when it fails. */
  answer(key: string): Promise<T | undefined> {
    return (this.#pending.get(key) ?? Promise.resolve(undefined)).catch(() => undefined);
  }

  /** Keep `sent` as the request in flight for `key` (unless one is) until it settles; returns it. */
  track(key: string, sent: Promise<T>): Promise<T> {
    if (!this.#pending.has(key)) {
      this.#pending.set(key, sent);
      const forget = () => {
        if (this.#pending.get(key) === sent) this.#pending.delete(key);
      };
      sent.then(forget, forget);
    }
    return sent;
  }
}

// ---- SQL rows ----

/** A row of a SQL store's records table: the record's fields and its meta, snake_case. */
export interface RecordRow {
  key?: unknown;
  state?: unknown;
  fingerprint?: unknown;
  token?: unknown;
  lease_expires_at?: unknown;
  expires_at?: unknown;
  created_at?: unknown;
  completed_at?: unknown;
  outcome?: unknown;
  tool_name?: unknown;
  scope?: unknown;
  turn_id?: unknown;
}

const RECORD_STATES: ReadonlySet<unknown> = new Set(['in_progress', 'completed', 'failed']);

/**
 * What is wrong with a row the store did not write (a state it does not know, a time that is
 * not a whole number of ms as `isTime` tells the engine's, a finished row without its outcome,
 * a value that is not text where text belongs), or undefined when nothing is.
 */
export function recordRowProblem(
  row: RecordRow,
  isTime: (value: unknown) => boolean,
): string | undefined {
  const text = (v: unknown) => typeof v === 'string';
  return !RECORD_STATES.has(row.state)
    ? 'an unknown state'
    : ![row.key, row.fingerprint, row.token].every(text)
      ? 'a key, fingerprint or token that is not text'
      : ![row.lease_expires_at, row.expires_at, row.created_at].every(isTime)
        ? 'a time that is not a whole number of ms'
        : !(row.completed_at == null || isTime(row.completed_at))
          ? 'a completion time that is not a whole number of ms'
          : row.state !== 'in_progress' && !text(row.outcome)
            ? 'a finished state without its outcome'
            : ![row.outcome, row.tool_name, row.scope, row.turn_id].every(
                  (v) => v == null || text(v),
                )
              ? 'an outcome or meta that is not text'
              : undefined;
}

/** The record of a row `recordRowProblem` finds nothing wrong with (a listing leaves out `outcome`). */
export function recordFromRow(row: RecordRow): IdempotencyRecord {
  const record: IdempotencyRecord = {
    key: row.key as string,
    state: row.state as IdempotencyRecord['state'],
    fingerprint: row.fingerprint as string,
    token: row.token as string,
    leaseExpiresAt: Number(row.lease_expires_at),
    expiresAt: Number(row.expires_at),
    createdAt: Number(row.created_at),
  };
  if (row.completed_at != null) record.completedAt = Number(row.completed_at);
  if (row.outcome != null) record.outcome = row.outcome as string;
  const meta: RecordMeta = {};
  if (row.tool_name != null) meta.toolName = row.tool_name as string;
  if (row.scope != null) meta.scope = row.scope as string;
  if (row.turn_id != null) meta.turnId = row.turn_id as string;
  if (Object.keys(meta).length > 0) record.meta = meta;
  return record;
}

/** The meta columns a `list` / `stats` filter sets, with their values, in a fixed order. */
export function filterColumns(
  filter: StatsFilter,
): Array<['tool_name' | 'turn_id' | 'scope', string]> {
  const columns: Array<['tool_name' | 'turn_id' | 'scope', string]> = [];
  if (filter.toolName !== undefined) columns.push(['tool_name', filter.toolName]);
  if (filter.turnId !== undefined) columns.push(['turn_id', filter.turnId]);
  if (filter.scope !== undefined) columns.push(['scope', filter.scope]);
  return columns;
}

/**
 * The WHERE of `list` / `stats` for a SQL store whose placeholders are `?`: live rows (those
 * whose `expires_at` is after `now`), the filter's meta columns, and its inspection state
 * (`stale` is an `in_progress` row whose lease has run out). Join `where` with ` AND `.
 */
export function inspectionWhere(
  filter: StatsFilter & { state?: string | undefined },
  now: number,
): { where: string[]; params: Array<string | number> } {
  const where = ['expires_at > ?'];
  const params: Array<string | number> = [now];
  for (const [column, value] of filterColumns(filter)) {
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (filter.state === 'in_progress' || filter.state === 'stale') {
    where.push(
      `state = 'in_progress' AND lease_expires_at ${filter.state === 'stale' ? '<=' : '>'} ?`,
    );
    params.push(now);
  } else if (filter.state !== undefined) {
    where.push('state = ?');
    params.push(filter.state);
  }
  return { where, params };
}

/** `StoreStats` taken at `at` from a row of counts: `records`, `in_progress`, `stale`, ... */
export function statsFromRow(row: Record<string, unknown>, at: number): StoreStats {
  return {
    records: Number(row.records),
    inProgress: Number(row.in_progress),
    stale: Number(row.stale),
    completed: Number(row.completed),
    failed: Number(row.failed),
    at,
  };
}

// ---- pages ----

/**
 * One page of a listing read with a limit of `limit + 1`: the first `limit` rows as `item`s under
 * `field`, and, when there was one more row, the cursor of the last item (`cursorOf`).
 */
export function pageOf<F extends string, R, T>(
  field: F,
  rows: readonly R[],
  limit: number,
  item: (row: R) => T,
  cursorOf: (item: T) => unknown,
): { [K in F]: T[] } & { cursor?: string } {
  const items = rows.slice(0, limit).map(item);
  const page = { [field]: items } as { [K in F]: T[] };
  const last = items.at(-1);
  return rows.length > limit && last !== undefined
    ? { ...page, cursor: encodeCursor(cursorOf(last)) }
    : page;
}

/** The key a key-ordered listing resumes after (its cursor), undefined on the first page. */
export function cursorKey(cursor: string | undefined): string | undefined {
  return cursor === undefined
    ? undefined
    : decodeCursor(cursor, (v) => (typeof v === 'string' ? v : undefined));
}

/** The id an id-ordered listing (newest first) resumes before (its cursor), or undefined. */
export function cursorId(cursor: string | undefined): number | undefined {
  return cursor === undefined
    ? undefined
    : decodeCursor(cursor, (v) => (Number.isSafeInteger(v) ? (v as number) : undefined));
}

// ---- the batched audit log ----

/** What a `BatchedAuditLog` takes besides where it writes. */
export interface BatchedAuditLogOptions {
  /**
   * How long events are kept, in ms: older ones are invisible and deleted in bounded batches as
   * new events are written (and by `purgeExpired`).
   * @default 604800000 (7 days)
   */
  retentionMs?: number;
  /** Most events per write. @default 100 */
  batchSize?: number;
  /** Longest an event waits before it is written, in ms. @default 1000 */
  flushIntervalMs?: number;
  /** Most events held while writes lag; more are dropped and counted. @default 10000 */
  maxBuffered?: number;
  /** Told about every failed write (the events are dropped). @default ignore */
  onError?: (error: unknown, events: IdempotencyEvent[]) => void;
  /** The clock for the retention, in ms since the epoch (events carry their own times). @default Date.now */
  now?: () => number;
}

/** Least time between two cleanups made by writes. */
const SWEEP_EVERY_MS = 60_000;

/** The conditions of an audit `query` beyond its filter. */
export interface AuditQueryConditions {
  key?: string | undefined;
  outcome?: string | undefined;
  /** Only events with a smaller id (the cursor). */
  before?: number | undefined;
}

/**
 * An audit log that writes batches of events to a table (`createBatchedSink`): the retention,
 * `pending` / `dropped`, `flush` / `close`, at most one cleanup a minute by the writes, events
 * with an operator left out and counted when the table cannot hold them, the WHERE of reads and
 * their pages. The SQLite and PostgreSQL audit logs extend it with their table.
 */
export abstract class BatchedAuditLog implements AuditLog {
  readonly retentionMs: number;
  readonly onEvent: EventHandler;

  readonly #sink: BatchedSink;
  readonly #now: () => number;
  readonly #onError: BatchedAuditLogOptions['onError'];
  #lastSweep = 0;
  /** Events with an operator dropped because the table cannot hold it. */
  #lostOperators = 0;

  constructor(options: BatchedAuditLogOptions) {
    this.retentionMs = checkWholeNumber(
      'retentionMs',
      options.retentionMs ?? DEFAULT_AUDIT_RETENTION_MS,
      1,
    );
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError;
    this.#sink = createBatchedSink({
      write: (batch) => this.writeBatch(batch),
      ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      ...(options.flushIntervalMs === undefined
        ? {}
        : { flushIntervalMs: options.flushIntervalMs }),
      ...(options.maxBuffered === undefined ? {} : { maxBuffered: options.maxBuffered }),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    });
    this.onEvent = this.#sink.onEvent;
  }

  get pending(): number {
    return this.#sink.pending;
  }

  get dropped(): number {
    return this.#sink.dropped + this.#lostOperators;
  }

  flush(): Promise<void> {
    return this.#sink.flush();
  }

  close(): Promise<void> {
    return this.#sink.close();
  }

  abstract query(query?: AuditQuery): Promise<AuditPage>;
  abstract stats(filter?: AuditStatsFilter): Promise<AuditStats>;
  abstract purgeExpired(): Promise<number>;

  /** Write one batch to the table (the sink calls it, one batch at a time). */
  protected abstract writeBatch(batch: IdempotencyEvent[]): void | Promise<void>;

  /** Events that ended at or before this time (ms) are past the retention, now. */
  protected retentionStart(): number {
    return this.#now() - this.retentionMs;
  }

  /** Whether a write cleans up expired events now (at most once a minute); counts it done. */
  protected sweepDue(): boolean {
    const now = this.#now();
    if (now - this.#lastSweep < SWEEP_EVERY_MS) return false;
    this.#lastSweep = now;
    return true;
  }

  /**
   * The events of `batch` without an operator, for a table that cannot hold one: the others are
   * counted as dropped and reported to `onError` with `StoreUnavailableError(problem(lost))`.
   */
  protected withoutOperators(
    batch: IdempotencyEvent[],
    problem: (lost: number) => string,
  ): IdempotencyEvent[] {
    const lost = batch.filter((e) => e.operator != null);
    this.#lostOperators += lost.length;
    const error = new StoreUnavailableError({ message: problem(lost.length) });
    try {
      this.#onError?.(error, lost);
    } catch {
      // The error reporter must not break the writes.
    }
    return batch.filter((e) => e.operator == null);
  }

  /**
   * The WHERE of a read, its conditions and their values: within the retention, the filter's
   * columns, then a query's key, outcome and cursor. `placeholder(n)` writes the n-th parameter
   * (`$n`, `?`).
   */
  protected where(
    filter: AuditStatsFilter,
    placeholder: (n: number) => string,
    query: AuditQueryConditions = {},
  ): { where: string[]; values: Array<string | number> } {
    const where: string[] = [];
    const values: Array<string | number> = [];
    for (const [column, op, value] of [
      ['ended_at', '>', this.retentionStart()],
      ['ended_at', '>=', filter.since],
      ['ended_at', '<', filter.until],
      ['tool_name', '=', filter.toolName],
      ['scope', '=', filter.scope],
      ['turn_id', '=', filter.turnId],
      ['key', '=', query.key],
      ['outcome', '=', query.outcome],
      ['id', '<', query.before],
    ] as const) {
      if (value === undefined) continue;
      values.push(value);
      where.push(`${column} ${op} ${placeholder(values.length)}`);
    }
    return { where, values };
  }

  /** The page of a query read with a limit of `limit + 1`, newest first. */
  protected page(rows: ReadonlyArray<AuditRow & { operator?: unknown }>, limit: number): AuditPage {
    return pageOf('events', rows, limit, auditEntryFromRow, (entry) => entry.id);
  }

  /** The stats of rows of counts per outcome (`n`; `rf`: replayed failures). */
  protected statsOf(
    rows: ReadonlyArray<{ outcome: unknown; n: unknown; rf: unknown }>,
    filter: AuditStatsFilter,
  ): AuditStats {
    const counts = rows.map((r) => ({
      outcome: String(r.outcome),
      count: Number(r.n),
      replayedFailures: Number(r.rf),
    }));
    return auditStatsFrom(counts, filter);
  }
}
