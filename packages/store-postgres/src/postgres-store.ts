import { createHash } from 'node:crypto';
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  checkListFilter,
  checkStatsFilter,
  checkStoreTimeout,
  emptyStats,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
  RecordIntegrityError,
  type RecordPage,
  reasonOf,
  type StatsFilter,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
  withDeadline,
} from '@idempotent-tools/core';
import {
  checkWholeNumber,
  cursorKey,
  filterColumns,
  InFlight,
  pageOf,
  recordFromRow,
  recordRowProblem,
  statsFromRow,
} from '@idempotent-tools/core/store-kit';
import { ChangeListener, type PgListenClient } from './change-listener.js';
import type { Driver, DriverName, DriverResult } from './driver.js';
import { type PostgresClient, resolveDriver } from './resolve-driver.js';
import {
  isMissingTable,
  type ResolvedNames,
  resolveNames,
  runLockedDdl,
  schemaSql,
  type TableNames,
} from './schema.js';

export interface PostgresStoreOptions extends TableNames {
  /**
   * The client library of the first argument. Detected from its shape: a postgres.js instance
   * (a function with `unsafe` and `listen`), a PGlite instance (`query`, `exec`, `listen`,
   * `waitReady`), else `pg` (anything with `query(config)`). Set it to have a mismatch thrown.
   * @default detected
   */
  driver?: DriverName;
  /**
   * `LISTEN`/`NOTIFY` channel for change notifications. Every process sharing the table must use
   * the same one.
   * @default 'idempotent_tools.<schema>.<table>' (hashed when longer than 63 bytes)
   */
  channel?: string;
  /**
   * Send `NOTIFY` on complete / release and `LISTEN` for it in `waitForChange`, so waiters in
   * every process wake at once. Turn off behind a transaction-mode pooler (PgBouncer), where
   * `LISTEN` does not work: waiters then poll. All processes sharing the table should agree.
   * @default true
   */
  notifications?: boolean;
  /**
   * `pg` only: a connected client dedicated to `LISTEN`. The store adds listeners to it and `UNLISTEN`s in
   * `close()`, but never ends it.
   * @default with a `pg.Pool`, a client of the store's own, opened on the first wait with the
   * pool's settings (`new pool.Client(pool.options)`: one connection besides the pool's `max`,
   * never one of the pool's) and ended by `close()`; with a single `pg.Client`, that client
   */
  listenClient?: PgListenClient;
  /**
   * Use named prepared statements (parsed once per connection). Turn off for poolers that do not
   * support them. postgres.js: per statement, besides the instance's own `prepare` option (which
   * wins when false). PGlite has none: ignored.
   * @default true
   */
  preparedStatements?: boolean;
  /**
   * Rows deleted per statement by `purgeExpired` (it loops until none is left).
   * @default 1000
   */
  purgeBatchSize?: number;
  /**
   * Longest one store operation may take, in ms, whatever the driver's own settings (a `pg`
   * pool waiting for a free connection, a client that reconnects): then it fails with
   * `StoreUnavailableError`. The statement may still run later, which every operation allows
   * for (each is safe to send again).
   * @default 5000
   */
  timeoutMs?: number;
}

/** Current database time in milliseconds: every client agrees on it. */
const NOW_MS = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
const COLUMNS = [
  'key',
  'state',
  'fingerprint',
  'token',
  'lease_expires_at',
  'expires_at',
  'created_at',
  'completed_at',
  'outcome',
  'tool_name',
  'scope',
  'turn_id',
] as const;
/** A live row may exist although `INSERT ... ON CONFLICT` saw it and the snapshot did not. */
const MAX_CLAIM_ATTEMPTS = 10;
/** Retries of a statement that failed with a serialization failure or deadlock. */
const MAX_SERIALIZATION_RETRIES = 3;
/** Keys whose in_progress holder this store saw last (for waiters' re-check). */
const SEEN_LIMIT = 10_000;

interface Statement {
  name: string;
  text: string;
}

function buildStatements(names: ResolvedNames, notify: boolean) {
  const t = names.qualified;
  const cols = (alias: string) => COLUMNS.map((c) => `${alias}.${c}`).join(', ');
  const clock = `clock AS (SELECT ${NOW_MS} AS ms)`;
  const fence = `r.key = $1 AND r.token = $2 AND r.state = 'in_progress' AND r.expires_at > clock.ms`;
  // NOTIFY only when a waiter flagged the row: every NOTIFY takes a database-wide lock at
  // commit, which serialises the commits of every notifying transaction (and their WAL flush).
  const announce = (cte: string, channelParam: string) =>
    notify
      ? `SELECT key, CASE WHEN waiting THEN pg_notify(${channelParam}, key) END FROM ${cte}`
      : `SELECT key FROM ${cte}`;
  const sql = {
    // One statement: report the live row, or insert, or take over an expired row. The live row
    // is read first (a plain snapshot read): a replay neither locks it nor writes (no xid, no
    // WAL). Under READ COMMITTED a row committed after the snapshot can block the upsert yet be
    // invisible to the read: no row comes back and the claim runs again.
    claim: `WITH ${clock},
live AS (
  SELECT ${cols('r')}, false AS acquired, clock.ms AS now FROM ${t} r, clock
  WHERE r.key = $1 AND r.expires_at > clock.ms
),
acquired AS (
  INSERT INTO ${t} AS r (key, state, fingerprint, token, lease_expires_at, expires_at, created_at,
    tool_name, scope, turn_id)
  SELECT $1, 'in_progress', $2, $3, clock.ms + $4::bigint, clock.ms + greatest($4::bigint, $5::bigint),
    clock.ms, $6, $7, $8
  FROM clock WHERE NOT EXISTS (SELECT 1 FROM live)
  ON CONFLICT (key) DO UPDATE SET state = excluded.state, fingerprint = excluded.fingerprint,
    token = excluded.token, lease_expires_at = excluded.lease_expires_at,
    expires_at = excluded.expires_at, created_at = excluded.created_at, completed_at = NULL,
    outcome = NULL, tool_name = excluded.tool_name, scope = excluded.scope, turn_id = excluded.turn_id,
    waiting = false
  WHERE r.expires_at <= excluded.created_at
  RETURNING ${cols('r')}, true AS acquired
),
renewed AS (
  UPDATE ${t} r SET lease_expires_at = clock.ms + $4::bigint,
    expires_at = greatest(r.expires_at, clock.ms + $4::bigint)
  FROM clock
  WHERE EXISTS (
      SELECT 1 FROM live WHERE live.token = $3 AND live.fingerprint = $2
        AND live.state = 'in_progress' AND live.lease_expires_at <= live.now
    )
    AND r.key = $1 AND r.token = $3 AND r.state = 'in_progress' AND r.expires_at > clock.ms
  RETURNING ${cols('r')}, true AS acquired
)
SELECT acquired.*, (SELECT ms FROM clock) AS now FROM acquired
UNION ALL
SELECT renewed.*, (SELECT ms FROM clock) AS now FROM renewed
UNION ALL
SELECT * FROM live`,
    // A complete sent again (its reply was lost) finds the row finished by its own token with
    // its own state and outcome: \`again\` returns it (only when the fence matched nothing).
    complete: `WITH ${clock},
done AS (
  UPDATE ${t} r SET state = $3, outcome = $4, completed_at = clock.ms,
    expires_at = clock.ms + $5::bigint
  FROM clock WHERE ${fence}
  RETURNING r.key, r.waiting
),
again AS (
  SELECT r.key FROM ${t} r, clock
  WHERE NOT EXISTS (SELECT 1 FROM done) AND r.key = $1 AND r.token = $2 AND r.state = $3
    AND r.outcome = $4 AND r.expires_at > clock.ms
)
${announce('done', '$6')}
UNION ALL
SELECT key${notify ? ', NULL' : ''} FROM again`,
    release: `WITH ${clock},
gone AS (DELETE FROM ${t} r USING clock WHERE ${fence} RETURNING r.key, r.waiting)
${announce('gone', '$3')}`,
    renew: `WITH ${clock}
UPDATE ${t} r SET lease_expires_at = clock.ms + $3::bigint,
  expires_at = greatest(r.expires_at, clock.ms + $3::bigint)
FROM clock WHERE ${fence}`,
    // A takeover sent again (its reply was lost) finds the row in_progress under its new token.
    takeover: `WITH ${clock},
taken AS (
  UPDATE ${t} r SET token = $3, lease_expires_at = clock.ms + $4::bigint,
    expires_at = clock.ms + greatest($4::bigint, $5::bigint)
  FROM clock
  WHERE ${fence} AND r.lease_expires_at <= clock.ms
  RETURNING r.key
),
again AS (
  SELECT r.key FROM ${t} r, clock
  WHERE NOT EXISTS (SELECT 1 FROM taken) AND $3 <> $2 AND r.key = $1 AND r.token = $3
    AND r.state = 'in_progress' AND r.expires_at > clock.ms
)
SELECT key FROM taken
UNION ALL
SELECT key FROM again`,
    get: `WITH ${clock}
SELECT ${cols('r')} FROM ${t} r, clock WHERE r.key = $1 AND r.expires_at > clock.ms`,
    // A waiter asks for a NOTIFY (once per record: a flagged row is not written again).
    flag: `WITH ${clock}
UPDATE ${t} r SET waiting = true FROM clock
WHERE r.key = $1 AND r.state = 'in_progress' AND NOT r.waiting AND r.expires_at > clock.ms`,
    peek: `WITH ${clock}
SELECT r.token, (r.state = 'in_progress' AND r.lease_expires_at > clock.ms) AS running
FROM ${t} r, clock WHERE r.key = $1 AND r.expires_at > clock.ms`,
    purge: `WITH ${clock},
doomed AS (
  SELECT r.key FROM ${t} r, clock WHERE r.expires_at <= clock.ms
  ORDER BY r.expires_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED
)
DELETE FROM ${t} r USING doomed, clock WHERE r.key = doomed.key AND r.expires_at <= clock.ms`,
  };
  const statements = {} as Record<keyof typeof sql, Statement>;
  for (const [op, text] of Object.entries(sql) as [keyof typeof sql, string][]) {
    const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
    statements[op] = { name: `idempotent_tools_${op}_${digest}`, text };
  }
  return statements;
}

/**
 * PostgreSQL `text` holds neither NUL nor lone surrogates (they would not round-trip); PGlite
 * also drops a leading U+FEFF from every text it returns (`lossyBom`).
 */
function storable(value: string, lossyBom = false): boolean {
  return (
    !value.includes('\u0000') && value.isWellFormed() && !(lossyBom && value.startsWith('\uFEFF'))
  );
}

/** Whether every text of a filter can be stored (else no record can match it). */
function filterStorable(filter: StatsFilter, lossyBom: boolean): boolean {
  return [filter.toolName, filter.turnId, filter.scope].every(
    (v) => v === undefined || storable(v, lossyBom),
  );
}

/**
 * The WHERE of `list` / `stats` over `r` and `clock`: live rows and the filter's columns. Texts
 * that cannot be stored are replaced by a parameter no row matches.
 */
function inspectionWhere(
  filter: StatsFilter & { state?: string | undefined },
  lossyBom: boolean,
): {
  where: string[];
  values: unknown[];
} {
  const where = ['r.expires_at > clock.ms'];
  const values: unknown[] = [];
  for (const [column, value] of filterColumns(filter)) {
    values.push(storable(value, lossyBom) ? value : '');
    where.push(`r.${column} = $${values.length}`);
  }
  if (filter.state === 'in_progress') {
    where.push(`r.state = 'in_progress' AND r.lease_expires_at > clock.ms`);
  } else if (filter.state === 'stale') {
    where.push(`r.state = 'in_progress' AND r.lease_expires_at <= clock.ms`);
  } else if (filter.state !== undefined) {
    values.push(filter.state);
    where.push(`r.state = $${values.length}`);
  }
  return { where, values };
}

/** A statement built at run time, named after its text (prepared once per connection). */
function dynamic(op: string, text: string): Statement {
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `idempotent_tools_${op}_${digest}`, text };
}

function checkText(field: string, value: string | undefined, lossyBom: boolean): void {
  if (value !== undefined && lossyBom && storable(value) && !storable(value, true)) {
    throw new InvalidInputError({
      field,
      message: `${field} starts with U+FEFF (a byte order mark), which PGlite drops from the text it returns: it would not round-trip. Remove it or put another character before it (the executor's outcomes are JSON and never start with it).`,
    });
  }
  if (value !== undefined && !storable(value)) {
    throw new InvalidInputError({
      field,
      message: `${field} contains a NUL character (\\u0000) or a lone surrogate, which PostgreSQL text cannot store. Escape it (JSON.stringify does) or remove it.`,
    });
  }
}

/** A bigint column as `pg` returns it (a string by default), or a parsed one. */
const isTime = (v: unknown): boolean =>
  (typeof v === 'string' && /^-?\d{1,16}$/.test(v)) ||
  (typeof v === 'number' && Number.isSafeInteger(v)) ||
  typeof v === 'bigint';

/**
 * A row the store wrote: any other (a finished row without its outcome, a state the store does
 * not know because a CHECK was dropped, a column of another type after a bad migration) is
 * refused with `RecordIntegrityError`: replaying it would hand the caller garbage as an outcome.
 */
function checkRow(row: Record<string, unknown>, table: string): Record<string, unknown> {
  const problem = recordRowProblem(row, isTime);
  if (problem === undefined) return row;
  const key = String(row.key);
  throw new RecordIntegrityError({
    key,
    reason: 'corrupt',
    message: `The PostgreSQL idempotency store found a row it did not write in ${table} (key ${JSON.stringify(key)}: ${problem}). It was not replayed and the tool did not run. Inspect the row and delete it (DELETE FROM ${table} WHERE key = ...), then retry the call; check that nothing else writes to the table.`,
  });
}

/**
 * The PostgreSQL store on `pg`, postgres.js or PGlite: durable, one statement per operation,
 * times from the database clock, waiters woken through `LISTEN`/`NOTIFY`.
 *
 * ```ts
 * const store = createPostgresStore(new pg.Pool({ connectionString })); // or postgres(url), new PGlite()
 * await store.ensureSchema(); // or run sql/schema.sql in your migrations
 * const idempotency = createIdempotency({ store });
 * ```
 */
export function createPostgresStore(
  pool: PostgresClient,
  options: PostgresStoreOptions = {},
): PostgresStore {
  return new PostgresStore(pool, options);
}

export class PostgresStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'postgres';
  readonly capabilities: { notifiesChanges: boolean; durable: boolean };
  /** The resolved schema, table and channel names. */
  readonly names: ResolvedNames;

  /**
   * Resolve when `key` is completed or released by any process (`NOTIFY`), or after `timeoutMs`.
   * Never rejects. Absent when the store cannot listen (`notifications: false`, or a client with
   * `query` only): the executor then polls with claims.
   */
  readonly waitForChange?: (key: string, timeoutMs: number, signal?: AbortSignal) => Promise<void>;

  /** The client library the store runs on. */
  readonly driver: DriverName;
  readonly #db: Driver;
  /** The client drops a leading U+FEFF of the text it returns (PGlite): refuse such text. */
  readonly #lossyBom: boolean;
  readonly #sql: ReturnType<typeof buildStatements>;
  readonly #notify: boolean;
  readonly #prepare: boolean;
  readonly #timeoutMs: number;
  readonly #purgeBatchSize: number;
  readonly #changes: ChangeListener;
  readonly #seen = new Map<string, string>();
  readonly #checking = new Map<string, Promise<boolean>>();
  /** The claim statement in flight per key (see `claim`). */
  readonly #claiming = new InFlight<Record<string, unknown> | undefined>();

  constructor(pool: PostgresClient, options: PostgresStoreOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidInputError({ field: 'options', message: 'options must be an object.' });
    }
    const names = resolveNames(options);
    const channel = options.channel ?? names.channel;
    if (typeof channel !== 'string' || !/^[A-Za-z0-9_.:-]+$/.test(channel) || channel.length > 63) {
      throw new InvalidInputError({
        field: 'channel',
        message: `channel must be 1-63 characters of letters, digits, _ . : -, got ${JSON.stringify(channel)}.`,
      });
    }
    const batch = checkWholeNumber('purgeBatchSize', options.purgeBatchSize ?? 1000, 1, 1_000_000);
    const driver = resolveDriver(pool, options);
    this.names = { ...names, channel };
    this.#db = driver;
    this.driver = driver.name;
    this.#lossyBom = driver.name === 'pglite';
    this.#notify = options.notifications ?? true;
    this.#prepare = options.preparedStatements ?? true;
    this.#timeoutMs = checkStoreTimeout('createPostgresStore', options.timeoutMs);
    this.#purgeBatchSize = batch;
    this.#sql = buildStatements(names, this.#notify);
    const listen = this.#notify ? driver.listen : undefined;
    this.#changes = new ChangeListener(listen, channel);
    this.capabilities = { notifiesChanges: listen !== undefined, durable: true };
    if (listen !== undefined) {
      this.waitForChange = (key, timeoutMs, signal) =>
        this.#changes.wait(key, timeoutMs, () => this.#changedSinceClaim(key), signal);
    }
  }

  /**
   * Create the table and its index if they do not exist (the DDL of `schemaSql`). Safe to call
   * from many processes at once: an advisory lock serialises it.
   */
  async ensureSchema(): Promise<void> {
    try {
      await runLockedDdl(this.#db, this.names.lockKey, schemaSql(this.names));
    } catch (error) {
      throw this.#unavailable('ensureSchema', error);
    }
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    checkText('key', input.key, this.#lossyBom);
    checkText('fingerprint', input.fingerprint, this.#lossyBom);
    checkText('token', input.token, this.#lossyBom);
    checkText('meta.toolName', input.meta?.toolName, this.#lossyBom);
    checkText('meta.scope', input.meta?.scope, this.#lossyBom);
    checkText('meta.turnId', input.meta?.turnId, this.#lossyBom);
    const values = [
      input.key,
      input.fingerprint,
      input.token,
      input.leaseMs,
      input.ttlMs,
      input.meta?.toolName ?? null,
      input.meta?.scope ?? null,
      input.meta?.turnId ?? null,
    ];
    // A claim of this key already on its way: if it finds a finished row, that is this claim's
    // answer too (a finished row never changes until it expires or is deleted). Waiters woken
    // together (a same-key storm) then cost one statement per process, not one each.
    const shared = this.#claiming.has(input.key)
      ? await this.#claiming.answer(input.key)
      : undefined;
    if (shared !== undefined && shared.acquired !== true && shared.state !== 'in_progress') {
      const record = recordFromRow(checkRow(shared, this.names.qualified));
      return record.fingerprint !== input.fingerprint
        ? { status: 'drift', record }
        : { status: 'completed', record };
    }
    for (let attempt = 1; attempt <= MAX_CLAIM_ATTEMPTS; attempt++) {
      // The row this claim acquired or renewed comes first; else the live row.
      const sent = this.#run('claim', this.#sql.claim, values, input.key).then(
        (r) => r.rows.find((row) => row.acquired === true) ?? r.rows[0],
      );
      const row = await this.#claiming.track(input.key, sent);
      if (row === undefined) continue;
      const record = recordFromRow(checkRow(row, this.names.qualified));
      if (row.acquired === true) return { status: 'acquired', token: input.token, record };
      if (record.fingerprint !== input.fingerprint) return { status: 'drift', record };
      if (record.state !== 'in_progress') return { status: 'completed', record };
      if (record.token === input.token) {
        // This attempt's own claim, sent again (the connection dropped after the first
        // committed): it owns the record as stored. Had its lease run out, the statement would
        // have renewed it (acquired above) unless a takeover won meanwhile: read again.
        if (record.leaseExpiresAt > Number(row.now)) {
          return { status: 'acquired', token: input.token, record };
        }
        continue;
      }
      this.#remember(record.key, record.token);
      if (record.leaseExpiresAt <= Number(row.now)) return { status: 'stale', record };
      return { status: 'in_progress', record };
    }
    throw new StoreUnavailableError({
      key: input.key,
      message: `The PostgreSQL store could not settle the claim of ${input.key} in ${MAX_CLAIM_ATTEMPTS} attempts (the record kept changing). The tool did not run; retry the same call.`,
    });
  }

  async complete(input: CompleteInput): Promise<boolean> {
    checkText('outcome', input.outcome, this.#lossyBom);
    if (!storable(input.key, this.#lossyBom) || !storable(input.token, this.#lossyBom))
      return false;
    const values = [input.key, input.token, input.state, input.outcome, input.ttlMs];
    if (this.#notify) values.push(this.names.channel);
    return (await this.#run('complete', this.#sql.complete, values, input.key)).rowCount === 1;
  }

  async release(key: string, token: string): Promise<boolean> {
    if (!storable(key, this.#lossyBom) || !storable(token, this.#lossyBom)) return false;
    const values: unknown[] = [key, token];
    if (this.#notify) values.push(this.names.channel);
    return (await this.#run('release', this.#sql.release, values, key)).rowCount === 1;
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    if (!storable(key, this.#lossyBom) || !storable(token, this.#lossyBom)) return false;
    return (await this.#run('renew', this.#sql.renew, [key, token, leaseMs], key)).rowCount === 1;
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    if (!storable(input.key, this.#lossyBom) || !storable(input.staleToken, this.#lossyBom))
      return false;
    checkText('token', input.token, this.#lossyBom);
    const values = [input.key, input.staleToken, input.token, input.leaseMs, input.ttlMs];
    return (await this.#run('takeover', this.#sql.takeover, values, input.key)).rowCount === 1;
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    if (!storable(key, this.#lossyBom)) return undefined;
    const row = (await this.#run('get', this.#sql.get, [key], key)).rows[0];
    return row === undefined ? undefined : recordFromRow(checkRow(row, this.names.qualified));
  }

  /** Delete expired records in batches of `purgeBatchSize`. Returns how many were removed. */
  async purgeExpired(): Promise<number> {
    let removed = 0;
    for (;;) {
      const { rowCount } = await this.#run('purgeExpired', this.#sql.purge, [this.#purgeBatchSize]);
      removed += rowCount ?? 0;
      if ((rowCount ?? 0) < this.#purgeBatchSize) return removed;
    }
  }

  /**
   * Live records in key order, without outcomes (admin only: a tool, turn or scope filter scans
   * the live rows; no index serves those columns).
   */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    const after = cursorKey(checked.cursor);
    if (
      !filterStorable(checked, this.#lossyBom) ||
      (after !== undefined && !storable(after, this.#lossyBom))
    )
      return { records: [] };
    const { where, values } = inspectionWhere(checked, this.#lossyBom);
    if (after !== undefined) {
      values.push(after);
      where.push(`r.key > $${values.length}`);
    }
    values.push(checked.limit + 1);
    const text = `WITH clock AS (SELECT ${NOW_MS} AS ms)
SELECT r.key, r.state, r.fingerprint, r.token, r.lease_expires_at, r.expires_at, r.created_at,
  r.completed_at, octet_length(r.outcome) AS outcome_bytes, r.tool_name, r.scope, r.turn_id,
  clock.ms AS now
FROM ${this.names.qualified} r, clock WHERE ${where.join(' AND ')}
ORDER BY r.key LIMIT $${values.length}`;
    const { rows } = await this.#run('list', dynamic('list', text), values);
    const listed = (row: Record<string, unknown>): ListedRecord => {
      const record = recordFromRow(row);
      const entry: ListedRecord = {
        ...record,
        inspectionState: inspectionStateOf(record, Number(row.now)),
      };
      if (row.outcome_bytes != null) entry.outcomeBytes = Number(row.outcome_bytes);
      return entry;
    };
    return pageOf('records', rows, checked.limit, listed, (record) => record.key);
  }

  /** Live records by state (one aggregate statement over the live rows). */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    const { where, values } = inspectionWhere(checked, this.#lossyBom);
    const text = `WITH clock AS (SELECT ${NOW_MS} AS ms)
SELECT clock.ms AS now, count(r.key) AS records,
  count(r.key) FILTER (WHERE r.state = 'in_progress' AND r.lease_expires_at > clock.ms) AS in_progress,
  count(r.key) FILTER (WHERE r.state = 'in_progress' AND r.lease_expires_at <= clock.ms) AS stale,
  count(r.key) FILTER (WHERE r.state = 'completed') AS completed,
  count(r.key) FILTER (WHERE r.state = 'failed') AS failed
FROM clock LEFT JOIN ${this.names.qualified} r ON ${where.join(' AND ')}
GROUP BY clock.ms`;
    const { rows } = await this.#run('stats', dynamic('stats', text), values);
    const row = rows[0] ?? {};
    if (!filterStorable(checked, this.#lossyBom)) return emptyStats(Number(row.now));
    return statsFromRow(row, Number(row.now));
  }

  /** Wake every waiter and end the store's own `LISTEN` connection. Never ends your pool or client. */
  async close(): Promise<void> {
    await this.#changes.close();
  }

  // ---- internals ----

  async #run(
    what: string,
    statement: Statement,
    values: unknown[],
    key?: string,
  ): Promise<DriverResult> {
    const config = this.#prepare
      ? { name: statement.name, text: statement.text, values }
      : { text: statement.text, values };
    for (let attempt = 1; ; attempt++) {
      try {
        return await withDeadline(
          this.#db.query(config),
          this.#timeoutMs,
          () => new Error(`no answer within ${this.#timeoutMs} ms (timeoutMs)`),
        );
      } catch (error) {
        // Only with a stricter default isolation level; the statement rolled back: run it again.
        const code = (error as { code?: unknown }).code;
        if ((code === '40001' || code === '40P01') && attempt < MAX_SERIALIZATION_RETRIES) {
          continue;
        }
        throw this.#unavailable(what, error, key);
      }
    }
  }

  #unavailable(what: string, cause: unknown, key?: string): StoreUnavailableError {
    const reason = reasonOf(cause);
    const message = isMissingTable(cause)
      ? `The PostgreSQL store's table ${this.names.qualified} does not exist (${reason}). Create it with store.ensureSchema() or run schemaSql() / sql/schema.sql in a migration.`
      : `The PostgreSQL store failed during ${what}: ${reason}. The database may be down or unreachable: check it, then retry the same call.`;
    return new StoreUnavailableError({ key, cause, message });
  }

  #remember(key: string, token: string): void {
    this.#seen.delete(key);
    this.#seen.set(key, token);
    if (this.#seen.size > SEEN_LIMIT) {
      const oldest = this.#seen.keys().next();
      if (oldest.done !== true) this.#seen.delete(oldest.value);
    }
  }

  /**
   * Whether the record changed since a claim of this store saw it `in_progress` (or, unseen,
   * whether it is finished or stale): the change may have committed before `LISTEN` was active.
   * First it flags the row (`waiting`), so that a later complete / release sends a `NOTIFY`;
   * the look runs after the flag committed, so a change that missed the flag is seen by it.
   * Concurrent waiters of one key (the `LISTEN` is already active for all of them) share it.
   */
  #changedSinceClaim(key: string): Promise<boolean> {
    const pending = this.#checking.get(key);
    if (pending !== undefined) return pending;
    const check = (async () => {
      try {
        await this.#run('waitForChange', this.#sql.flag, [key], key);
        const row = (await this.#run('waitForChange', this.#sql.peek, [key], key)).rows[0];
        const seen = this.#seen.get(key);
        return row === undefined
          ? seen !== undefined
          : row.running !== true || (seen !== undefined && row.token !== seen);
      } finally {
        this.#checking.delete(key);
      }
    })();
    this.#checking.set(key, check);
    return check;
  }
}
