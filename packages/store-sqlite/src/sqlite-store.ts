import { randomUUID } from 'node:crypto';
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  checkListFilter,
  checkStatsFilter,
  checkStoreText,
  IdempotencyError,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  inspectionStateOf,
  type ListedRecord,
  type ListFilter,
  RecordIntegrityError,
  type RecordPage,
  type StatsFilter,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
} from '@idempotent-tools/core';
import {
  checkClock,
  checkOneOf,
  checkWholeNumber,
  cursorKey,
  inspectionWhere,
  pageOf,
  recordFromRow,
  recordRowProblem,
  statsFromRow,
} from '@idempotent-tools/core/store-kit';
import {
  checkTableName,
  type Driver,
  isBusy,
  type SqliteDatabaseLike,
  type SqliteDriverName,
  type Statement,
  sqliteCode,
  toDriver,
} from './driver.js';

export interface SqliteStoreOptions {
  /**
   * Table holding the records, created if missing (with an index on `expires_at`). Letters,
   * digits and `_`, not starting with a digit or `sqlite_`, at most 63 characters.
   * @default 'idempotency_records'
   */
  table?: string;
  /**
   * How long a statement waits for another connection's write lock before failing with
   * `StoreUnavailableError`, in ms (`PRAGMA busy_timeout`, set on the connection).
   * @default 5000
   */
  busyTimeoutMs?: number;
  /**
   * Switch the database to write-ahead logging (`PRAGMA journal_mode=WAL`, kept in the file):
   * readers never block the writer, and replays never wait for a lock. Set `false` to keep
   * the journal mode you chose.
   * @default true
   */
  wal?: boolean;
  /**
   * `PRAGMA synchronous` for the connection. `NORMAL` with WAL: every commit survives a crash of
   * the process; a power loss or OS crash may roll back the last commits (never corrupts).
   * `FULL`: commits also survive a power loss, at the cost of an fsync per write.
   * @default 'NORMAL'
   */
  synchronous?: 'NORMAL' | 'FULL' | 'EXTRA';
  /**
   * The clock, in ms since the epoch. Every process sharing a file must use the same clock
   * (the system clock); tests pass a controllable one.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Amortised cleanup: after this many writes the store deletes up to `sweepBatch` expired rows,
   * so the table stays bounded by the live records even if `purgeExpired` is never called.
   * `0` turns it off.
   * @default 100
   */
  sweepEvery?: number;
  /**
   * Most expired rows one amortised cleanup deletes (keeps each cleanup short).
   * @default 500
   */
  sweepBatch?: number;
}

const COLUMNS =
  'key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, outcome, tool_name, scope, turn_id';
const SETUP_RETRY_MS = 25;

interface Row {
  key: string;
  state: IdempotencyRecord['state'];
  fingerprint: string;
  token: string;
  lease_expires_at: number | bigint;
  expires_at: number | bigint;
  created_at: number | bigint;
  completed_at: number | bigint | null;
  outcome: string | null;
  tool_name: string | null;
  scope: string | null;
  turn_id: string | null;
}

type Statements = Record<
  | 'select'
  | 'insert'
  | 'reclaim'
  | 'complete'
  | 'completed'
  | 'release'
  | 'renew'
  | 'takeover'
  | 'takenOver'
  | 'purge'
  | 'sweep',
  Statement
>;

/** In-process wake-ups, shared by every store of this module on one file and table. */
const channels = new Map<string, Set<() => void>>();

/** A time as SQLite returns an INTEGER column. */
const isTime = (v: unknown): boolean =>
  typeof v === 'bigint' || (typeof v === 'number' && Number.isSafeInteger(v));

/**
 * A row the store wrote: any other (a state it does not know, a time that is not an integer, a
 * finished row without its outcome, a blob where text belongs) is refused with
 * `RecordIntegrityError`. SQLite keeps whatever a stray writer puts in a column; replaying it
 * would hand the caller somebody's garbage as an outcome.
 */
function checkRow(row: Row, table: string): Row {
  const problem = recordRowProblem(row, isTime);
  if (problem === undefined) return row;
  const key = typeof row.key === 'string' ? row.key : String(row.key);
  throw new RecordIntegrityError({
    key,
    reason: 'corrupt',
    message: `The SQLite idempotency store found a row it did not write in table ${table} (key ${JSON.stringify(key)}: ${problem}). It was not replayed and the tool did not run. Inspect the row and delete it (DELETE FROM "${table}" WHERE key = ...), then retry the call; check that nothing else writes to the table.`,
  });
}

const LIST_COLUMNS =
  'key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, length(CAST(outcome AS BLOB)) AS outcome_bytes, tool_name, scope, turn_id';

interface ListRow extends Omit<Row, 'outcome'> {
  outcome_bytes: number | bigint | null;
}

function toListed(row: ListRow, now: number): ListedRecord {
  const { outcome_bytes, ...rest } = row;
  const { outcome: _none, ...record } = recordFromRow(rest);
  const listed: ListedRecord = { ...record, inspectionState: inspectionStateOf(record, now) };
  if (outcome_bytes !== null) listed.outcomeBytes = Number(outcome_bytes);
  return listed;
}

/** Block the thread for `ms` (only while a concurrent first setup holds the schema lock). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The SQLite store: durable, embedded, shared safely by every process on one machine that opens
 * the same file. Pass your own connection, a `node:sqlite` `DatabaseSync` (no native build) or a
 * `better-sqlite3` `Database`; the store never closes it.
 *
 * ```ts
 * const store = createSqliteStore(new DatabaseSync('agent.db'));
 * const idempotency = createIdempotency({ store });
 * ```
 */
export function createSqliteStore(
  db: SqliteDatabaseLike,
  options: SqliteStoreOptions = {},
): SqliteStore {
  return new SqliteStore(db, options, false);
}

/**
 * Open (or create) the SQLite file at `path` with `node:sqlite` and return a store over it;
 * `close()` closes the connection.
 *
 * ```ts
 * const store = openSqliteStore('agent.db');
 * ```
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteStore {
  if (typeof path !== 'string' || path === '') {
    throw new InvalidInputError({
      field: 'path',
      message: "openSqliteStore needs a file path, e.g. openSqliteStore('agent.db').",
    });
  }
  const sqlite = process.getBuiltinModule?.('node:sqlite');
  if (sqlite === undefined) {
    throw new Error(
      'openSqliteStore needs node:sqlite (Node >= 22.13). On an older Node, pass a better-sqlite3 Database to createSqliteStore.',
    );
  }
  const { DatabaseSync } = sqlite;
  let db: InstanceType<typeof DatabaseSync>;
  try {
    db = new DatabaseSync(path);
  } catch (cause) {
    throw new StoreUnavailableError({
      cause,
      message: `Could not open the SQLite file ${path}: ${String((cause as Error).message)}. Check that the directory exists and is writable, then try again.`,
    });
  }
  try {
    return new SqliteStore(db, options, true);
  } catch (error) {
    db.close();
    throw error;
  }
}

/** The SQLite store. Build it with `createSqliteStore` or `openSqliteStore`. */
export class SqliteStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'sqlite';
  /** Durable; other processes cannot push changes, so waiters there poll (the executor does it). */
  readonly capabilities = { notifiesChanges: false, durable: true };
  /** The table holding the records. */
  readonly table: string;
  /** The library of the connection. */
  readonly driver: SqliteDriverName;
  /** The connection (yours, or the one `openSqliteStore` opened). */
  readonly database: SqliteDatabaseLike;

  readonly #db: Driver;
  readonly #ownsDatabase: boolean;
  readonly #now: () => number;
  readonly #busyTimeoutMs: number;
  readonly #wal: boolean;
  readonly #synchronous: string;
  readonly #sweepEvery: number;
  readonly #sweepBatch: number;
  readonly #channel: string;
  readonly #waiters = new Set<() => void>();
  #statements: Statements | undefined;
  #writes = 0;
  #closed = false;

  /** @internal Use `createSqliteStore` or `openSqliteStore`. */
  constructor(db: SqliteDatabaseLike, options: SqliteStoreOptions, ownsDatabase: boolean) {
    this.#db = toDriver(db);
    this.database = db;
    this.driver = this.#db.name;
    this.#ownsDatabase = ownsDatabase;
    const table = checkTableName(options.table ?? 'idempotency_records');
    this.table = table;
    this.#busyTimeoutMs = checkWholeNumber('busyTimeoutMs', options.busyTimeoutMs ?? 5000, 0);
    this.#sweepEvery = checkWholeNumber('sweepEvery', options.sweepEvery ?? 100, 0);
    this.#sweepBatch = checkWholeNumber('sweepBatch', options.sweepBatch ?? 500, 1);
    this.#wal = options.wal ?? true;
    const synchronous = options.synchronous ?? 'NORMAL';
    this.#synchronous = checkOneOf('synchronous', synchronous, ['NORMAL', 'FULL', 'EXTRA']);
    this.#now = checkClock(options.now);
    this.#channel = `${this.#db.file ?? randomUUID()}\0${table}\0`;
    this.#statements = this.#engine('setup', () => this.#setup());
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    checkStoreText('key', input.key);
    checkStoreText('meta.toolName', input.meta?.toolName);
    checkStoreText('meta.scope', input.meta?.scope);
    checkStoreText('meta.turnId', input.meta?.turnId);
    return this.#engine('claim', () => {
      const { select, insert } = this.#prepared();
      // Read first: a replay or a wait takes no write lock. Only a miss writes, with an upsert
      // that replaces nothing live; if another process won meanwhile, read its record.
      for (let attempt = 0; attempt < 100; attempt++) {
        const now = this.#now();
        const row = select.get(input.key, now) as Row | undefined;
        if (row !== undefined) {
          const record = recordFromRow(checkRow(row, this.table));
          if (record.fingerprint !== input.fingerprint) return { status: 'drift', record };
          if (record.state !== 'in_progress') return { status: 'completed', record };
          if (record.token === input.token) {
            // This attempt's own claim, sent again (its first answer was lost): it owns the
            // record. A lease that ran out meanwhile is renewed (fenced: unless taken over).
            if (record.leaseExpiresAt > now)
              return { status: 'acquired', token: input.token, record };
            const renewed = this.#prepared().reclaim.get(
              now + input.leaseMs,
              now + input.leaseMs,
              input.key,
              input.token,
              now,
            ) as Row | undefined;
            if (renewed !== undefined) {
              return { status: 'acquired', token: input.token, record: recordFromRow(renewed) };
            }
            continue; // taken over meanwhile: read again
          }
          if (record.leaseExpiresAt <= now) return { status: 'stale', record };
          return { status: 'in_progress', record };
        }
        const inserted = insert.get(
          input.key,
          input.fingerprint,
          input.token,
          now + input.leaseMs,
          now + Math.max(input.ttlMs, input.leaseMs),
          now,
          input.meta?.toolName ?? null,
          input.meta?.scope ?? null,
          input.meta?.turnId ?? null,
          now,
        ) as Row | undefined;
        if (inserted !== undefined) {
          this.#wrote(now);
          return { status: 'acquired', token: input.token, record: recordFromRow(inserted) };
        }
      }
      throw new Error(`the record of ${input.key} kept changing under 100 claims in a row`);
    });
  }

  async complete(input: CompleteInput): Promise<boolean> {
    checkStoreText('outcome', input.outcome);
    return this.#engine('complete', () => {
      const now = this.#now();
      const { changes } = this.#prepared().complete.run(
        input.state,
        input.outcome,
        now,
        now + input.ttlMs,
        input.key,
        input.token,
        now,
      );
      if (Number(changes) === 0) {
        // The same complete sent again (its first answer was lost): already stored by this
        // token with this state and outcome, so accepted, and nothing changes.
        const again = this.#prepared().completed.get(
          input.key,
          input.token,
          input.state,
          input.outcome,
          now,
        );
        return again !== undefined;
      }
      this.#notify(input.key);
      this.#wrote(now);
      return true;
    });
  }

  async release(key: string, token: string): Promise<boolean> {
    return this.#engine('release', () => {
      const { changes } = this.#prepared().release.run(key, token, this.#now());
      if (Number(changes) === 0) return false;
      this.#notify(key);
      return true;
    });
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    return this.#engine('renew', () => {
      const now = this.#now();
      const until = now + leaseMs;
      return Number(this.#prepared().renew.run(until, until, key, token, now).changes) > 0;
    });
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    return this.#engine('takeover', () => {
      const now = this.#now();
      const { changes } = this.#prepared().takeover.run(
        input.token,
        now + input.leaseMs,
        now + Math.max(input.ttlMs, input.leaseMs),
        input.key,
        input.staleToken,
        now,
        now,
      );
      if (Number(changes) > 0) return true;
      // The same takeover sent again (its first answer was lost): the new token owns the record.
      if (input.token === input.staleToken) return false;
      return this.#prepared().takenOver.get(input.key, input.token, now) !== undefined;
    });
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    return this.#engine('get', () => {
      const row = this.#prepared().select.get(key, this.#now()) as Row | undefined;
      return row === undefined ? undefined : recordFromRow(checkRow(row, this.table));
    });
  }

  /**
   * Resolves when a store of this process completes or releases `key` in the same file and
   * table, or after `timeoutMs`. Other processes cannot notify: the executor polls meanwhile.
   */
  waitForChange(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const channel = this.#channel + key;
      let set = channels.get(channel);
      if (set === undefined) {
        set = new Set();
        channels.set(channel, set);
      }
      const waiters = set;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        waiters.delete(done);
        this.#waiters.delete(done);
        if (waiters.size === 0 && channels.get(channel) === waiters) channels.delete(channel);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      waiters.add(done);
      this.#waiters.add(done);
    });
  }

  /**
   * Live records in key order, without outcomes (admin only: with a tool, turn or scope filter it
   * scans the live rows; no index serves those columns).
   */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    const after = cursorKey(checked.cursor);
    return this.#engine('list', () => {
      this.#prepared();
      const now = this.#now();
      const { where, params } = inspectionWhere(checked, now);
      if (after !== undefined) {
        where.push('key > ?');
        params.push(after);
      }
      const rows = this.#db
        .prepare(
          `SELECT ${LIST_COLUMNS} FROM "${this.table}" WHERE ${where.join(' AND ')} ORDER BY key LIMIT ?`,
        )
        .all(...params, checked.limit + 1) as ListRow[];
      const listed = (row: ListRow) => toListed(row, now);
      return pageOf('records', rows, checked.limit, listed, (record) => record.key);
    });
  }

  /** Live records by state (one aggregate statement over the live rows). */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    return this.#engine('stats', () => {
      this.#prepared();
      const now = this.#now();
      const { where, params } = inspectionWhere(checked, now);
      const row = this.#db
        .prepare(
          `SELECT count(*) AS records,
             coalesce(sum(state = 'in_progress' AND lease_expires_at > ?), 0) AS in_progress,
             coalesce(sum(state = 'in_progress' AND lease_expires_at <= ?), 0) AS stale,
             coalesce(sum(state = 'completed'), 0) AS completed,
             coalesce(sum(state = 'failed'), 0) AS failed
           FROM "${this.table}" WHERE ${where.join(' AND ')}`,
        )
        .get(now, now, ...params) as Record<string, number | bigint>;
      return statsFromRow(row, now);
    });
  }

  /** Delete every expired record now; returns how many were removed. */
  async purgeExpired(): Promise<number> {
    return this.#engine('purgeExpired', () =>
      Number(this.#prepared().purge.run(this.#now()).changes),
    );
  }

  /** Stop the store and wake its waiters; closes the connection only if `openSqliteStore` opened it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#statements = undefined;
    for (const wake of [...this.#waiters]) wake();
    if (this.#ownsDatabase && this.#db.isOpen()) this.database.close();
  }

  #setup(): Statements {
    const deadline = Date.now() + this.#busyTimeoutMs;
    for (;;) {
      try {
        return this.#setupOnce();
      } catch (error) {
        // A first setup by another process (journal mode switch, CREATE TABLE) holds the lock.
        if (!isBusy(sqliteCode(error)) || Date.now() >= deadline) throw error;
        pause(SETUP_RETRY_MS);
      }
    }
  }

  #setupOnce(): Statements {
    const db = this.#db;
    const t = `"${this.table}"`;
    db.exec(`PRAGMA busy_timeout = ${this.#busyTimeoutMs}`);
    if (this.#wal && db.file !== undefined) {
      const mode = db.prepare('PRAGMA journal_mode').get() as { journal_mode?: string };
      if (mode.journal_mode?.toLowerCase() !== 'wal') db.exec('PRAGMA journal_mode = WAL');
    }
    db.exec(`PRAGMA synchronous = ${this.#synchronous}`);
    db.exec(`CREATE TABLE IF NOT EXISTS ${t} (
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
    db.exec(`CREATE INDEX IF NOT EXISTS "${this.table}_expires_at" ON ${t} (expires_at)`);
    const fenced = `key = ? AND token = ? AND state = 'in_progress' AND expires_at > ?`;
    return {
      select: db.prepare(`SELECT ${COLUMNS} FROM ${t} WHERE key = ? AND expires_at > ?`),
      insert: db.prepare(
        `INSERT INTO ${t} (${COLUMNS}) VALUES (?, 'in_progress', ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET state = excluded.state, fingerprint = excluded.fingerprint,
           token = excluded.token, lease_expires_at = excluded.lease_expires_at,
           expires_at = excluded.expires_at, created_at = excluded.created_at, completed_at = NULL,
           outcome = NULL, tool_name = excluded.tool_name, scope = excluded.scope,
           turn_id = excluded.turn_id
         WHERE ${t}.expires_at <= ?
         RETURNING ${COLUMNS}`,
      ),
      reclaim: db.prepare(
        `UPDATE ${t} SET lease_expires_at = ?, expires_at = max(expires_at, ?) WHERE ${fenced}
         RETURNING ${COLUMNS}`,
      ),
      complete: db.prepare(
        `UPDATE ${t} SET state = ?, outcome = ?, completed_at = ?, expires_at = ? WHERE ${fenced}`,
      ),
      completed: db.prepare(
        `SELECT 1 AS found FROM ${t} WHERE key = ? AND token = ? AND state = ? AND outcome = ?
           AND expires_at > ?`,
      ),
      release: db.prepare(`DELETE FROM ${t} WHERE ${fenced}`),
      renew: db.prepare(
        `UPDATE ${t} SET lease_expires_at = ?, expires_at = max(expires_at, ?) WHERE ${fenced}`,
      ),
      takeover: db.prepare(
        `UPDATE ${t} SET token = ?, lease_expires_at = ?, expires_at = ?
         WHERE key = ? AND token = ? AND state = 'in_progress' AND lease_expires_at <= ? AND expires_at > ?`,
      ),
      takenOver: db.prepare(
        `SELECT 1 AS found FROM ${t} WHERE key = ? AND token = ? AND state = 'in_progress'
           AND expires_at > ?`,
      ),
      purge: db.prepare(`DELETE FROM ${t} WHERE expires_at <= ?`),
      sweep: db.prepare(
        `DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t} WHERE expires_at <= ? LIMIT ?)`,
      ),
    };
  }

  #prepared(): Statements {
    // A node:sqlite connection closed and reopened by its owner: its statements were finalised
    // and its busy timeout reset, so set the connection up again.
    this.#statements ??= this.#setup();
    return this.#statements;
  }

  /** Count a write; every `sweepEvery` writes delete a bounded batch of expired rows. */
  #wrote(now: number): void {
    if (this.#sweepEvery === 0 || ++this.#writes % this.#sweepEvery !== 0) return;
    try {
      this.#prepared().sweep.run(now, this.#sweepBatch);
    } catch {
      // Best effort (e.g. the lock is busy): the write it follows has committed; the next sweep
      // or purgeExpired catches up.
    }
  }

  #notify(key: string): void {
    const waiters = channels.get(this.#channel + key);
    if (waiters !== undefined) for (const wake of [...waiters]) wake();
  }

  /** Run one operation; engine failures become `StoreUnavailableError`. */
  #engine<T>(operation: string, run: () => T): T {
    if (this.#closed) {
      throw new StoreUnavailableError({
        message: `The SQLite store was closed, so ${operation} cannot run. Create a new store (createSqliteStore / openSqliteStore) and retry the call.`,
      });
    }
    for (let attempt = 0; ; attempt++) {
      try {
        if (!this.#db.isOpen()) throw new Error('database is not open');
        return run();
      } catch (error) {
        if (IdempotencyError.isInstance(error)) throw error;
        const code = sqliteCode(error);
        // Statements finalised by a close and reopen never ran: prepare them again, once.
        if (code === 'SQLITE_CLOSED' && this.#db.isOpen() && attempt === 0) {
          this.#statements = undefined;
          continue;
        }
        if (code === 'SQLITE_CLOSED') this.#statements = undefined;
        throw this.#unavailable(operation, error, code);
      }
    }
  }

  #unavailable(operation: string, cause: unknown, code: string | undefined): StoreUnavailableError {
    const where = this.#db.file ?? 'an in-memory database';
    const what = `${cause instanceof Error ? cause.message : String(cause)}${code === undefined ? '' : ` (${code})`}`;
    const next =
      code === 'SQLITE_CLOSED'
        ? 'The connection is closed: reopen it (node:sqlite db.open()) or open a new one and create a new store, then retry the call.'
        : isBusy(code)
          ? `Another connection held the write lock longer than busyTimeoutMs (${this.#busyTimeoutMs} ms): look for a long transaction on the file, or raise busyTimeoutMs, then retry the call.`
          : `Check that ${where} and its directory exist, are writable and the disk is not full, then retry the call.`;
    return new StoreUnavailableError({
      cause,
      message: `The SQLite idempotency store (${where}, table ${this.table}) failed during ${operation}: ${what}. ${next}`,
    });
  }
}
