import {
  AUDIT_COLUMNS,
  type AuditLog,
  type AuditPage,
  type AuditQuery,
  type AuditRow,
  type AuditStats,
  type AuditStatsFilter,
  auditEntryFromRow,
  auditOperatorJson,
  auditRowValues,
  auditStatsFrom,
  checkAuditQuery,
  checkAuditStatsFilter,
  createBatchedSink,
  DEFAULT_AUDIT_RETENTION_MS,
  decodeCursor,
  encodeCursor,
  type IdempotencyEvent,
  InvalidInputError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { type Driver, type SqliteDatabaseLike, type SqlValue, toDriver } from './driver.js';

export interface SqliteAuditLogOptions {
  /**
   * Table of the events, created if missing (with indexes on `ended_at` and `key`). Same rules as
   * the store's `table`.
   * @default 'idempotency_audit'
   */
  table?: string;
  /**
   * How long events are kept, in ms: older ones are invisible and deleted in bounded batches
   * as new events are written (and by `purgeExpired`).
   * @default 604800000 (7 days)
   */
  retentionMs?: number;
  /** Most events per insert (one multi-row statement). @default 100 */
  batchSize?: number;
  /** Longest an event waits before it is written, in ms. @default 1000 */
  flushIntervalMs?: number;
  /** Most events held while writes lag; more are dropped and counted. @default 10000 */
  maxBuffered?: number;
  /** Told about every failed write (the events are dropped). @default ignore */
  onError?: (error: unknown, events: IdempotencyEvent[]) => void;
  /** `PRAGMA busy_timeout` set on the connection, in ms. @default 5000 */
  busyTimeoutMs?: number;
  /** The clock for the retention, in ms since the epoch (events carry their own times). @default Date.now */
  now?: () => number;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/** Most expired events one cleanup deletes. */
const SWEEP_BATCH = 1000;
/** Least time between two cleanups made by writes. */
const SWEEP_EVERY_MS = 60_000;

function checkPositive(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number >= 1, got ${String(value)}.`,
    });
  }
  return value;
}

/**
 * The durable audit trail in SQLite: an append-only table of events (never raw args or results),
 * written in batches off the calls' path, kept for `retentionMs`, with a reader. Pass the store's
 * connection (or any other); the log never closes it.
 *
 * ```ts
 * const store = openSqliteStore('agent.db');
 * const audit = createSqliteAuditLog(store.database, { retentionMs: 30 * 24 * 3600_000 });
 * const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
 * // later: await audit.stats({ since: Date.now() - 3600_000 }) -> { calls, replays, replayRate, ... }
 * ```
 */
export function createSqliteAuditLog(
  db: SqliteDatabaseLike,
  options: SqliteAuditLogOptions = {},
): SqliteAuditLog {
  return new SqliteAuditLog(db, options);
}

/** The SQLite audit log. Build it with `createSqliteAuditLog`. */
export class SqliteAuditLog implements AuditLog {
  readonly table: string;
  readonly retentionMs: number;
  readonly onEvent: (event: IdempotencyEvent) => void;

  readonly #db: Driver;
  readonly #now: () => number;
  readonly #busyTimeoutMs: number;
  readonly #sink: ReturnType<typeof createBatchedSink>;
  readonly #onError: SqliteAuditLogOptions['onError'];
  #ready = false;
  #lastSweep = 0;
  /** The table has the `operator` column (tables of 0.1 get it on first use). */
  #hasOperator = false;
  /** Why the `operator` column could not be added, when it could not. */
  #operatorProblem: string | undefined;
  /** Events with an operator dropped because the table cannot hold it. */
  #lostOperators = 0;

  /** @internal Use `createSqliteAuditLog`. */
  constructor(db: SqliteDatabaseLike, options: SqliteAuditLogOptions) {
    this.#db = toDriver(db);
    const table = options.table ?? 'idempotency_audit';
    if (typeof table !== 'string' || !TABLE_NAME.test(table) || /^sqlite_/i.test(table)) {
      throw new InvalidInputError({
        field: 'table',
        message: `table must be 1-63 letters, digits or _, not starting with a digit or sqlite_, got ${JSON.stringify(table)}.`,
      });
    }
    this.table = table;
    this.retentionMs = checkPositive(
      'retentionMs',
      options.retentionMs ?? DEFAULT_AUDIT_RETENTION_MS,
    );
    this.#busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    if (!Number.isSafeInteger(this.#busyTimeoutMs) || this.#busyTimeoutMs < 0) {
      throw new InvalidInputError({
        field: 'busyTimeoutMs',
        message: `busyTimeoutMs must be a whole number >= 0, got ${String(options.busyTimeoutMs)}.`,
      });
    }
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError;
    this.#sink = createBatchedSink({
      write: (batch) => this.#write(batch),
      ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      ...(options.flushIntervalMs === undefined
        ? {}
        : { flushIntervalMs: options.flushIntervalMs }),
      ...(options.maxBuffered === undefined ? {} : { maxBuffered: options.maxBuffered }),
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    });
    this.onEvent = this.#sink.onEvent;
    // Fail at creation on a bad connection or a read-only file, not on the first flush.
    this.#engine('setup', () => this.#setup());
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

  /** Events newest first (`id` descending), within the retention. */
  async query(query?: AuditQuery): Promise<AuditPage> {
    const q = checkAuditQuery(query);
    const before =
      q.cursor === undefined
        ? undefined
        : decodeCursor(q.cursor, (v) => (Number.isSafeInteger(v) ? (v as number) : undefined));
    return this.#engine('query', () => {
      this.#setup();
      const { where, params } = this.#where(q);
      for (const [column, value] of [
        ['key', q.key],
        ['outcome', q.outcome],
      ] as const) {
        if (value === undefined) continue;
        where.push(`${column} = ?`);
        params.push(value);
      }
      if (before !== undefined) {
        where.push('id < ?');
        params.push(before);
      }
      const operator = this.#hasOperator ? 'operator' : 'NULL AS operator';
      const rows = this.#db
        .prepare(
          `SELECT id, ${AUDIT_COLUMNS.join(', ')}, ${operator} FROM "${this.table}" WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`,
        )
        .all(...params, q.limit + 1) as Array<AuditRow & { operator: string | null }>;
      const events = rows.slice(0, q.limit).map(auditEntryFromRow);
      const last = events.at(-1);
      return rows.length > q.limit && last !== undefined
        ? { events, cursor: encodeCursor(last.id) }
        : { events };
    });
  }

  /**
   * Calls by outcome, replays and the replay rate, within the retention. A settlement (`settled`,
   * an operator's decision) is not a call: `calls`, `replays` and `replayRate` leave it out;
   * `byOutcome.settled` counts settlements.
   */
  async stats(filter?: AuditStatsFilter): Promise<AuditStats> {
    const f = checkAuditStatsFilter(filter);
    return this.#engine('stats', () => {
      this.#setup();
      const { where, params } = this.#where(f);
      const rows = this.#db
        .prepare(
          `SELECT outcome, count(*) AS n, coalesce(sum(error_code = 'replayed_failure'), 0) AS rf
           FROM "${this.table}" WHERE ${where.join(' AND ')} GROUP BY outcome`,
        )
        .all(...params) as Array<{ outcome: string; n: number | bigint; rf: number | bigint }>;
      return auditStatsFrom(
        rows.map((r) => ({
          outcome: r.outcome,
          count: Number(r.n),
          replayedFailures: Number(r.rf),
        })),
        f,
      );
    });
  }

  /** Delete every event older than the retention; returns how many were removed. */
  async purgeExpired(): Promise<number> {
    return this.#engine('purgeExpired', () => {
      this.#setup();
      let removed = 0;
      for (;;) {
        const n = this.#sweep();
        removed += n;
        if (n < SWEEP_BATCH) return removed;
      }
    });
  }

  #where(filter: AuditStatsFilter): { where: string[]; params: SqlValue[] } {
    const where = ['ended_at > ?'];
    const params: SqlValue[] = [this.#now() - this.retentionMs];
    if (filter.since !== undefined) {
      where.push('ended_at >= ?');
      params.push(filter.since);
    }
    if (filter.until !== undefined) {
      where.push('ended_at < ?');
      params.push(filter.until);
    }
    if (filter.toolName !== undefined) {
      where.push('tool_name = ?');
      params.push(filter.toolName);
    }
    if (filter.scope !== undefined) {
      where.push('scope = ?');
      params.push(filter.scope);
    }
    if (filter.turnId !== undefined) {
      where.push('turn_id = ?');
      params.push(filter.turnId);
    }
    return { where, params };
  }

  #setup(): void {
    if (this.#ready && this.#db.isOpen()) return;
    const t = `"${this.table}"`;
    this.#db.exec(`PRAGMA busy_timeout = ${this.#busyTimeoutMs}`);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS ${t} (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      key TEXT NOT NULL,
      tool_name TEXT NOT NULL,
      scope TEXT,
      turn_id TEXT,
      outcome TEXT NOT NULL,
      store TEXT NOT NULL,
      started_at INTEGER NOT NULL,
      ended_at INTEGER NOT NULL,
      duration_ms INTEGER NOT NULL,
      waited_ms INTEGER,
      error_code TEXT,
      args_fingerprint TEXT NOT NULL,
      args_bytes INTEGER NOT NULL,
      result_bytes INTEGER,
      operator TEXT
    )`);
    this.#db.exec(`CREATE INDEX IF NOT EXISTS "${this.table}_ended_at" ON ${t} (ended_at)`);
    this.#db.exec(`CREATE INDEX IF NOT EXISTS "${this.table}_key" ON ${t} (key)`);
    this.#hasOperator = this.#addOperatorColumn();
    this.#ready = true;
  }

  /**
   * The migration of a table made by 0.1 (no `operator` column): add it. A file the log cannot
   * alter (read-only) keeps working for reads and for events without an operator.
   */
  #addOperatorColumn(): boolean {
    const has = () =>
      (
        this.#db.prepare(`PRAGMA table_info("${this.table}")`).all() as Array<{ name: string }>
      ).some((column) => column.name === 'operator');
    if (has()) return true;
    try {
      this.#db.exec(`ALTER TABLE "${this.table}" ADD COLUMN operator TEXT`);
      return true;
    } catch (error) {
      // Another process may have added it meanwhile ("duplicate column name").
      if (has()) return true;
      this.#operatorProblem = error instanceof Error ? error.message : String(error);
      return false;
    }
  }

  #write(batch: IdempotencyEvent[]): void {
    this.#engine('write', () => {
      this.#setup();
      let events = batch;
      if (!this.#hasOperator && batch.some((e) => e.operator != null)) {
        this.#ready = false; // look again: someone may have migrated the table meanwhile
        this.#setup();
        if (!this.#hasOperator) events = this.#dropOperatorEvents(batch);
      }
      if (events.length > 0) {
        const columns = this.#hasOperator ? [...AUDIT_COLUMNS, 'operator'] : [...AUDIT_COLUMNS];
        const row = `(${columns.map(() => '?').join(', ')})`;
        const sql = `INSERT INTO "${this.table}" (${columns.join(', ')}) VALUES ${events.map(() => row).join(', ')}`;
        this.#db
          .prepare(sql)
          .run(
            ...events.flatMap((e) =>
              this.#hasOperator ? [...auditRowValues(e), auditOperatorJson(e)] : auditRowValues(e),
            ),
          );
      }
      const now = this.#now();
      if (now - this.#lastSweep >= SWEEP_EVERY_MS) {
        this.#lastSweep = now;
        this.#sweep();
      }
    });
  }

  /** Events without an operator; the others are reported and counted as dropped. */
  #dropOperatorEvents(batch: IdempotencyEvent[]): IdempotencyEvent[] {
    const lost = batch.filter((e) => e.operator != null);
    this.#lostOperators += lost.length;
    const error = new StoreUnavailableError({
      message: `The SQLite audit log (table ${this.table}) has no operator column and could not add it (${this.#operatorProblem ?? 'unknown reason'}): ${lost.length} settlement event(s) were dropped. Open the database writable once (the log adds the column), or run ALTER TABLE "${this.table}" ADD COLUMN operator TEXT.`,
    });
    try {
      this.#onError?.(error, lost);
    } catch {
      // The error reporter must not break the writes.
    }
    return batch.filter((e) => e.operator == null);
  }

  /** Delete up to one batch of expired events. */
  #sweep(): number {
    const t = `"${this.table}"`;
    return Number(
      this.#db
        .prepare(`DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} WHERE ended_at <= ? LIMIT ?)`)
        .run(this.#now() - this.retentionMs, SWEEP_BATCH).changes,
    );
  }

  #engine<T>(operation: string, run: () => T): T {
    try {
      if (!this.#db.isOpen()) throw new Error('database is not open');
      return run();
    } catch (error) {
      if (error instanceof InvalidInputError) throw error;
      this.#ready = false;
      const what = error instanceof Error ? error.message : String(error);
      throw new StoreUnavailableError({
        cause: error,
        message: `The SQLite audit log (table ${this.table}) failed during ${operation}: ${what}. Check that the database is open and writable, then retry.`,
      });
    }
  }
}
