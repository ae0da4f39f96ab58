import {
  AUDIT_COLUMNS,
  type AuditPage,
  type AuditQuery,
  type AuditRow,
  type AuditStats,
  type AuditStatsFilter,
  auditOperatorJson,
  auditRowValues,
  checkAuditQuery,
  checkAuditStatsFilter,
  type IdempotencyEvent,
  InvalidInputError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import {
  BatchedAuditLog,
  type BatchedAuditLogOptions,
  checkWholeNumber,
  cursorId,
} from '@idempotent-tools/core/store-kit';
import { checkTableName, type Driver, type SqliteDatabaseLike, toDriver } from './driver.js';

export interface SqliteAuditLogOptions extends BatchedAuditLogOptions {
  /**
   * Table of the events, created if missing (with indexes on `ended_at` and `key`). Same rules as
   * the store's `table`.
   * @default 'idempotency_audit'
   */
  table?: string;
  /** Most events per insert (one multi-row statement). @default 100 */
  batchSize?: number;
  /** `PRAGMA busy_timeout` set on the connection, in ms. @default 5000 */
  busyTimeoutMs?: number;
}

/** Most expired events one cleanup deletes. */
const SWEEP_BATCH = 1000;

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
export class SqliteAuditLog extends BatchedAuditLog {
  readonly table: string;

  readonly #db: Driver;
  readonly #busyTimeoutMs: number;
  #ready = false;
  /** The table has the `operator` column (tables of 0.1 get it on first use). */
  #hasOperator = false;
  /** Why the `operator` column could not be added, when it could not. */
  #operatorProblem: string | undefined;

  /** @internal Use `createSqliteAuditLog`. */
  constructor(db: SqliteDatabaseLike, options: SqliteAuditLogOptions) {
    const driver = toDriver(db);
    const table = checkTableName(options.table ?? 'idempotency_audit');
    super(options);
    this.#db = driver;
    this.table = table;
    this.#busyTimeoutMs = checkWholeNumber('busyTimeoutMs', options.busyTimeoutMs ?? 5000, 0);
    // Fail at creation on a bad connection or a read-only file, not on the first flush.
    this.#engine('setup', () => this.#setup());
  }

  /** Events newest first (`id` descending), within the retention. */
  async query(query?: AuditQuery): Promise<AuditPage> {
    const q = checkAuditQuery(query);
    const before = cursorId(q.cursor);
    return this.#engine('query', () => {
      this.#setup();
      const conditions = { key: q.key, outcome: q.outcome, before };
      const { where, values } = this.where(q, () => '?', conditions);
      const operator = this.#hasOperator ? 'operator' : 'NULL AS operator';
      const rows = this.#db
        .prepare(
          `SELECT id, ${AUDIT_COLUMNS.join(', ')}, ${operator} FROM "${this.table}" WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ?`,
        )
        .all(...values, q.limit + 1) as Array<AuditRow & { operator: string | null }>;
      return this.page(rows, q.limit);
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
      const { where, values } = this.where(f, () => '?');
      const rows = this.#db
        .prepare(
          `SELECT outcome, count(*) AS n, coalesce(sum(error_code = 'replayed_failure'), 0) AS rf
           FROM "${this.table}" WHERE ${where.join(' AND ')} GROUP BY outcome`,
        )
        .all(...values) as Array<{ outcome: string; n: number | bigint; rf: number | bigint }>;
      return this.statsOf(rows, f);
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

  protected writeBatch(batch: IdempotencyEvent[]): void {
    this.#engine('write', () => {
      this.#setup();
      let events = batch;
      if (!this.#hasOperator && batch.some((e) => e.operator != null)) {
        this.#ready = false; // look again: someone may have migrated the table meanwhile
        this.#setup();
        if (!this.#hasOperator) events = this.withoutOperators(batch, (n) => this.#noOperator(n));
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
      if (this.sweepDue()) this.#sweep();
    });
  }

  /** Why `lost` settlement events were dropped. */
  #noOperator(lost: number): string {
    return `The SQLite audit log (table ${this.table}) has no operator column and could not add it (${this.#operatorProblem ?? 'unknown reason'}): ${lost} settlement event(s) were dropped. Open the database writable once (the log adds the column), or run ALTER TABLE "${this.table}" ADD COLUMN operator TEXT.`;
  }

  /** Delete up to one batch of expired events. */
  #sweep(): number {
    const t = `"${this.table}"`;
    return Number(
      this.#db
        .prepare(`DELETE FROM ${t} WHERE id IN (SELECT id FROM ${t} WHERE ended_at <= ? LIMIT ?)`)
        .run(this.retentionStart(), SWEEP_BATCH).changes,
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
