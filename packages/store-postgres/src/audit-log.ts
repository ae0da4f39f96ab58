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
  reasonOf,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import {
  BatchedAuditLog,
  type BatchedAuditLogOptions,
  cursorId,
} from '@idempotent-tools/core/store-kit';
import type { Driver, DriverResult } from './driver.js';
import { type PostgresClient, resolveDriver } from './resolve-driver.js';
import {
  advisoryLockKey,
  checkIdentifier,
  createSchemaSql,
  DEFAULT_SCHEMA,
  indexName,
  isMissingTable,
  quoteIdent,
  runLockedDdl,
} from './schema.js';

export interface PostgresAuditLogOptions extends BatchedAuditLogOptions {
  /**
   * Schema of the table: `/^[a-z_][a-z0-9_]{0,62}$/`, always quoted.
   * @default 'public'
   */
  schema?: string;
  /**
   * The table of events, same rule.
   * @default 'idempotency_audit'
   */
  table?: string;
  /** Most events per insert (one `INSERT ... SELECT FROM unnest(...)`). @default 100 */
  batchSize?: number;
}

/** Most expired events one cleanup statement deletes. */
const SWEEP_BATCH = 1000;
const COLUMN_TYPES: Record<(typeof AUDIT_COLUMNS)[number], 'text' | 'bigint'> = {
  key: 'text',
  tool_name: 'text',
  scope: 'text',
  turn_id: 'text',
  outcome: 'text',
  store: 'text',
  started_at: 'bigint',
  ended_at: 'bigint',
  duration_ms: 'bigint',
  waited_ms: 'bigint',
  error_code: 'text',
  args_fingerprint: 'text',
  args_bytes: 'bigint',
  result_bytes: 'bigint',
};

/** The `operator` column of the table: there, missing and not addable by this role, or no table. */
type OperatorColumn = 'present' | 'cannot-add' | 'no-table';

/**
 * The DDL of the audit table, as plain SQL for your migrations (idempotent: `IF NOT EXISTS`).
 *
 * ```ts
 * await pool.query(auditSchemaSql({ schema: 'app', table: 'tool_call_audit' }));
 * ```
 */
export function auditSchemaSql(names: { schema?: string; table?: string } = {}): string {
  const schema = checkIdentifier('schema', names.schema ?? DEFAULT_SCHEMA);
  const table = checkIdentifier('table', names.table ?? 'idempotency_audit');
  const t = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  return `-- Audit log of @idempotent-tools/store-postgres: one row per call, append-only, never the
-- raw args or results. Times are ms since the Unix epoch (the clock of the process that ran the
-- call); rows older than the retention are deleted by the writers and by purgeExpired().
${createSchemaSql(schema)}CREATE TABLE IF NOT EXISTS ${t} (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  key text COLLATE "C" NOT NULL,
  tool_name text NOT NULL,
  scope text,
  turn_id text,
  outcome text NOT NULL,
  store text NOT NULL,
  started_at bigint NOT NULL,
  ended_at bigint NOT NULL,
  duration_ms bigint NOT NULL,
  waited_ms bigint,
  error_code text,
  args_fingerprint text NOT NULL,
  args_bytes bigint NOT NULL,
  result_bytes bigint,
  operator jsonb
);

-- An operator's settlement (outcome 'settled'): { by, reason, action }. Tables of 0.1 lack it.
ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS operator jsonb;

CREATE INDEX IF NOT EXISTS ${quoteIdent(indexName(table, '_ended_at_idx'))} ON ${t} (ended_at);
CREATE INDEX IF NOT EXISTS ${quoteIdent(indexName(table, '_key_idx'))} ON ${t} (key);
`;
}

/**
 * The durable audit trail in PostgreSQL: an append-only table of events (never raw args or
 * results), written in batches off the calls' path, kept for `retentionMs`, with a reader. Pass
 * your pg pool, postgres.js instance or PGlite (as for the store); the log never ends it.
 *
 * ```ts
 * const audit = createPostgresAuditLog(pool, { retentionMs: 30 * 24 * 3600_000 });
 * await audit.ensureSchema();
 * const idempotency = createIdempotency({ store, onEvent: audit.onEvent });
 * ```
 */
export function createPostgresAuditLog(
  pool: PostgresClient,
  options: PostgresAuditLogOptions = {},
): PostgresAuditLog {
  return new PostgresAuditLog(pool, options);
}

/** The PostgreSQL audit log. Build it with `createPostgresAuditLog`. */
export class PostgresAuditLog extends BatchedAuditLog {
  /** `"schema"."table"`. */
  readonly qualified: string;
  readonly schema: string;
  readonly table: string;

  readonly #db: Driver;
  /**
   * Whether the table has the `operator` column, once looked up (a table of 0.1 gets it then):
   * undefined until then, or after a failure.
   */
  #hasOperator: Promise<OperatorColumn> | undefined;
  /** Why the `operator` column could not be added, when it could not. */
  #operatorProblem: string | undefined;

  /** @internal Use `createPostgresAuditLog`. */
  constructor(pool: PostgresClient, options: PostgresAuditLogOptions) {
    if (pool == null) {
      throw new InvalidInputError({
        field: 'pool',
        message:
          'createPostgresAuditLog needs a pg.Pool (or pg.Client), a postgres.js instance or a PGlite instance: createPostgresAuditLog(pool).',
      });
    }
    // The same client as the store's: pg, postgres.js or PGlite (detected). Never listens.
    const db = resolveDriver(pool, {}, 'pool', 'createPostgresAuditLog');
    const schema = checkIdentifier('schema', options.schema ?? DEFAULT_SCHEMA);
    const table = checkIdentifier('table', options.table ?? 'idempotency_audit');
    super(options);
    this.#db = db;
    this.schema = schema;
    this.table = table;
    this.qualified = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  }

  /**
   * Create the table and its indexes if they do not exist (`auditSchemaSql`). Safe to call from
   * many processes at once: an advisory lock serialises it.
   */
  async ensureSchema(): Promise<void> {
    const lock = advisoryLockKey(`idempotent-tools/audit/${this.schema}.${this.table}`);
    try {
      await runLockedDdl(this.#db, lock, auditSchemaSql(this));
    } catch (error) {
      throw this.#unavailable('ensureSchema', error);
    }
    this.#hasOperator = Promise.resolve('present');
  }

  /** Events newest first (`id` descending), within the retention. */
  async query(query?: AuditQuery): Promise<AuditPage> {
    const q = checkAuditQuery(query);
    const before = cursorId(q.cursor);
    const conditions = { key: q.key, outcome: q.outcome, before };
    const { where, values } = this.where(q, (n) => `$${n}`, conditions);
    const operator =
      (await this.#operatorColumn()) === 'present' ? 'operator' : 'NULL::jsonb AS operator';
    const { rows } = await this.#query(
      'query',
      `SELECT id, ${AUDIT_COLUMNS.join(', ')}, ${operator} FROM ${this.qualified}
       WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT $${values.length + 1}`,
      [...values, q.limit + 1],
    );
    return this.page(rows as unknown as Array<AuditRow & { operator: unknown }>, q.limit);
  }

  /**
   * Calls by outcome, replays and the replay rate, within the retention. A settlement (`settled`,
   * an operator's decision) is not a call: `calls`, `replays` and `replayRate` leave it out;
   * `byOutcome.settled` counts settlements.
   */
  async stats(filter?: AuditStatsFilter): Promise<AuditStats> {
    const f = checkAuditStatsFilter(filter);
    const { where, values } = this.where(f, (n) => `$${n}`);
    const { rows } = await this.#query(
      'stats',
      `SELECT outcome, count(*) AS n, count(*) FILTER (WHERE error_code = 'replayed_failure') AS rf
       FROM ${this.qualified} WHERE ${where.join(' AND ')} GROUP BY outcome`,
      values,
    );
    return this.statsOf(rows as Array<{ outcome: unknown; n: unknown; rf: unknown }>, f);
  }

  /** Delete every event older than the retention; returns how many were removed. */
  async purgeExpired(): Promise<number> {
    let removed = 0;
    for (;;) {
      const n = await this.#sweep();
      removed += n;
      if (n < SWEEP_BATCH) return removed;
    }
  }

  /**
   * Whether the table has the `operator` column; a table of 0.1 gets it here, once (the check
   * takes no lock; `ALTER TABLE` runs only when the column is missing). A role that may not
   * alter the table keeps a working log: reads, and events without an operator.
   */
  #operatorColumn(): Promise<OperatorColumn> {
    this.#hasOperator ??= this.#addOperatorColumn().catch((error: unknown) => {
      this.#hasOperator = undefined;
      throw error;
    });
    return this.#hasOperator;
  }

  async #addOperatorColumn(): Promise<OperatorColumn> {
    const look = async () => {
      const { rows } = await this.#query(
        'setup',
        `SELECT to_regclass($1) IS NOT NULL AS found, EXISTS (
           SELECT 1 FROM pg_attribute
           WHERE attrelid = to_regclass($1) AND attname = 'operator' AND NOT attisdropped
         ) AS has`,
        [this.qualified],
      );
      return { found: rows[0]?.found === true, has: rows[0]?.has === true };
    };
    const before = await look();
    if (!before.found) {
      // No table yet: look again next time (ensureSchema creates it with the column).
      this.#hasOperator = undefined;
      return 'no-table';
    }
    if (before.has) return 'present';
    try {
      await this.#db.script(
        `ALTER TABLE ${this.qualified} ADD COLUMN IF NOT EXISTS operator jsonb`,
      );
      return 'present';
    } catch (error) {
      if ((await look()).has) return 'present';
      const code = (error as { code?: unknown }).code;
      // 42501: not the table's owner. Anything else (the database is down) is retried later.
      if (code !== '42501') throw this.#unavailable('setup', error);
      this.#operatorProblem = error instanceof Error ? error.message : String(error);
      return 'cannot-add';
    }
  }

  protected async writeBatch(batch: IdempotencyEvent[]): Promise<void> {
    let events = batch;
    let column = await this.#operatorColumn();
    if (column === 'cannot-add' && batch.some((e) => e.operator != null)) {
      // Look again: the table may have been migrated meanwhile.
      this.#hasOperator = undefined;
      column = await this.#operatorColumn();
      if (column === 'cannot-add') {
        events = this.withoutOperators(batch, (lost) => this.#noOperator(lost));
      }
    }
    // Without a table, the insert fails and says to create it (ensureSchema).
    const withOperator = column !== 'cannot-add';
    if (events.length > 0) {
      const names: string[] = [...AUDIT_COLUMNS];
      const types: string[] = AUDIT_COLUMNS.map((c) => COLUMN_TYPES[c]);
      const rows = events.map(auditRowValues);
      const columns: unknown[][] = AUDIT_COLUMNS.map((_, i) => rows.map((row) => row[i] ?? null));
      if (withOperator) {
        names.push('operator');
        types.push('jsonb');
        columns.push(events.map(auditOperatorJson));
      }
      // jsonb goes as text (JSON.stringify output) cast in SQL: a client that serialises jsonb
      // parameters itself (postgres.js) would otherwise store the JSON text as a JSON string.
      const unnest = types
        .map((type, i) =>
          type === 'jsonb' ? `$${i + 1}::text[]::jsonb[]` : `$${i + 1}::${type}[]`,
        )
        .join(', ');
      await this.#query(
        'write',
        `INSERT INTO ${this.qualified} (${names.join(', ')}) SELECT * FROM unnest(${unnest})`,
        columns,
      );
    }
    if (this.sweepDue()) await this.#sweep();
  }

  /** Why `lost` settlement events were dropped. */
  #noOperator(lost: number): string {
    return `The PostgreSQL audit table ${this.qualified} has no operator column and this role could not add it (${this.#operatorProblem ?? 'unknown reason'}): ${lost} settlement event(s) were dropped. Run auditSchemaSql() (or ALTER TABLE ${this.qualified} ADD COLUMN IF NOT EXISTS operator jsonb) as the table's owner.`;
  }

  async #sweep(): Promise<number> {
    const { rowCount } = await this.#query(
      'purgeExpired',
      `DELETE FROM ${this.qualified} WHERE id IN (
         SELECT id FROM ${this.qualified} WHERE ended_at <= $1
         ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [this.retentionStart(), SWEEP_BATCH],
    );
    return rowCount ?? 0;
  }

  async #query(what: string, text: string, values: unknown[]): Promise<DriverResult> {
    try {
      return await this.#db.query({ text, values });
    } catch (error) {
      throw this.#unavailable(what, error);
    }
  }

  #unavailable(what: string, cause: unknown): StoreUnavailableError {
    const reason = reasonOf(cause);
    return new StoreUnavailableError({
      cause,
      message: isMissingTable(cause)
        ? `The audit table ${this.qualified} does not exist (${reason}). Create it with audit.ensureSchema() or run auditSchemaSql() in a migration.`
        : `The PostgreSQL audit log failed during ${what}: ${reason}. Check that the database is up and reachable, then retry.`,
    });
  }
}
