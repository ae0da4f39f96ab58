import { existsSync, statSync } from 'node:fs';
import type { DatabaseSync } from 'node:sqlite';
import type { AuditLog, IdempotencyEvent, IdempotencyStore } from '@idempotent-tools/core';
import { createPostgresAuditLog, createPostgresStore } from '@idempotent-tools/store-postgres';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteAuditLog, createSqliteStore } from '@idempotent-tools/store-sqlite';
import { Redis } from 'ioredis';
import pg from 'pg';

/** Exit codes scripts can trust. */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** `inspect`: no live record under the key. */
  notFound: 1,
  /** Bad command, option or store URL. */
  usage: 2,
  /** The store could not be reached, or is not set up (missing file or table). */
  unavailable: 3,
  /** Anything else (a bug: please report it). */
  internal: 4,
  /** `settle`: the record is still held by a running attempt, or already finished; nothing changed. */
  conflict: 5,
} as const;

/** A failure with the exit code it maps to. */
export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
    /** Usage errors: the usage of the command (or of the CLI), printed after the message. */
    readonly usage?: string,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export interface StoreOptions {
  /** SQLite and PostgreSQL. @default 'idempotency_records' */
  table?: string | undefined;
  /** PostgreSQL. @default 'public' */
  schema?: string | undefined;
  /** Redis. @default 'idem:' */
  prefix?: string | undefined;
  /** SQLite and PostgreSQL: read calls and the replay rate from it when it exists. @default 'idempotency_audit' */
  auditTable?: string | undefined;
  /** Retention the audit reader applies (events older are invisible, and purged by `purge`). */
  auditRetentionMs?: number | undefined;
  /** Longest wait to connect, in ms. @default 5000 */
  timeoutMs?: number | undefined;
  /**
   * SQLite and PostgreSQL (`settle`): open the audit log for writing: its table is created when
   * missing (PostgreSQL: `ensureSchema`) and must hold an operator (the `operator` column, added
   * to an older table), or opening fails (unavailable) before anything is changed.
   */
  auditWrite?: boolean | undefined;
  /** Told about an audit write that failed (the events were not written). */
  onAuditError?: ((error: unknown, events: IdempotencyEvent[]) => void) | undefined;
}

/** A store opened from a URL, with its audit log when there is one. */
export interface OpenedStore {
  kind: 'sqlite' | 'redis' | 'postgres';
  store: IdempotencyStore;
  /** The audit log, when the store has one (SQL stores, table present). */
  audit: AuditLog | undefined;
  /** Why there is no audit log, for people. */
  auditNote: string | undefined;
  /** Where the audit log is, for people (`idempotency_audit in ./agent.db`), when there is one. */
  auditName: string | undefined;
  close(): Promise<void>;
}

/** A century: the audit reader's retention when none is given (show every stored event). */
const FOREVER = 100 * 365 * 24 * 60 * 60 * 1000;

/** The URL with its password hidden, for messages. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*):[^@/?#]*@/i, '$1:***@');
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** The cause of a failure, for a message (no trailing period). */
function reason(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return reason(error.errors[0]);
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.replace(/\.+$/, '');
}

/**
 * Open the store a URL names: `sqlite:PATH` (also `sqlite://PATH`), `redis://…` / `rediss://…`,
 * `postgres://…` / `postgresql://…`. Throws `CliError` (usage for a bad URL, unavailable for a
 * store that cannot be reached or is not set up).
 */
export async function openStore(url: string, options: StoreOptions = {}): Promise<OpenedStore> {
  const timeoutMs = options.timeoutMs ?? 5000;
  if (/^sqlite:/i.test(url)) return openSqlite(url, options);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(EXIT.usage, badUrl(url));
  }
  const scheme = parsed.protocol.toLowerCase();
  if (scheme === 'redis:' || scheme === 'rediss:') return openRedis(url, options, timeoutMs);
  if (scheme === 'postgres:' || scheme === 'postgresql:') {
    return openPostgres(url, options, timeoutMs);
  }
  throw new CliError(EXIT.usage, badUrl(url));
}

const SQLITE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const PG_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function checkName(option: string, value: string, pattern: RegExp): string {
  if (!pattern.test(value)) {
    throw new CliError(
      EXIT.usage,
      `${option} must match ${pattern.source}, got ${JSON.stringify(value)}.`,
    );
  }
  return value;
}

function badUrl(url: string): string {
  // A bare file path (`./agent.db`, `agent.sqlite`): most likely the SQLite file of an agent.
  const path = !/^[a-z][a-z0-9+.-]*:/i.test(url) || /^[a-z]:[\\/]/i.test(url);
  const hint = path ? ` For the SQLite file ${url}, write sqlite:${url}.` : '';
  return `Unsupported store URL ${JSON.stringify(redactUrl(url))}.${hint} Use sqlite:PATH, redis://HOST:PORT[/DB], rediss://..., or postgres://USER@HOST:PORT/DB.`;
}

async function openSqlite(url: string, options: StoreOptions): Promise<OpenedStore> {
  let path = url.replace(/^sqlite:/i, '');
  if (path.startsWith('//')) path = path.slice(2);
  if (path === '')
    throw new CliError(EXIT.usage, 'sqlite: needs a file path, e.g. sqlite:./agent.db.');
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new CliError(
      EXIT.unavailable,
      `No SQLite file at ${path}. Check the path (relative paths start from the current directory).`,
    );
  }
  const table = checkName('--table', options.table ?? 'idempotency_records', SQLITE_NAME);
  const auditTable = checkName(
    '--audit-table',
    options.auditTable ?? 'idempotency_audit',
    SQLITE_NAME,
  );
  // Loaded on use: Redis and PostgreSQL users need no node:sqlite (Node >= 22.13).
  const sqlite = process.getBuiltinModule?.('node:sqlite');
  if (sqlite === undefined) {
    throw new CliError(EXIT.unavailable, 'sqlite: URLs need node:sqlite (Node >= 22.13).');
  }
  let db: DatabaseSync;
  try {
    db = new sqlite.DatabaseSync(path);
  } catch (error) {
    throw new CliError(
      EXIT.unavailable,
      `Could not open the SQLite file ${path}: ${reason(error)}.`,
    );
  }
  const tableExists = (name: string) => {
    try {
      return (
        db
          .prepare("SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = ?")
          .get(name) !== undefined
      );
    } catch (error) {
      db.close();
      throw new CliError(
        EXIT.unavailable,
        `Could not read the SQLite file ${path}: ${reason(error)}.`,
      );
    }
  };
  if (!tableExists(table)) {
    db.close();
    throw new CliError(
      EXIT.unavailable,
      `${path} has no table ${table}: is it the store's file? Pass --table if the store uses another table.`,
    );
  }
  const hasAudit = options.auditWrite === true || tableExists(auditTable);
  let store: ReturnType<typeof createSqliteStore>;
  try {
    // wal: false leaves the file's journal mode as the application set it; no background sweeps.
    store = createSqliteStore(db, { table, wal: false, sweepEvery: 0 });
  } catch (error) {
    db.close();
    throw error;
  }
  let audit: ReturnType<typeof createSqliteAuditLog> | undefined;
  try {
    audit = hasAudit
      ? createSqliteAuditLog(db, {
          table: auditTable,
          retentionMs: options.auditRetentionMs ?? FOREVER,
          ...(options.onAuditError === undefined ? {} : { onError: options.onAuditError }),
        })
      : undefined;
    // The log adds the operator column to an older table; a file it cannot alter keeps none.
    if (
      options.auditWrite === true &&
      !(db.prepare(`PRAGMA table_info("${auditTable}")`).all() as Array<{ name: string }>).some(
        (column) => column.name === 'operator',
      )
    ) {
      throw new CliError(
        EXIT.unavailable,
        `The audit table ${auditTable} in ${path} has no operator column and it could not be added (is the file read-only?): nothing was changed. Open it writable, or run ALTER TABLE "${auditTable}" ADD COLUMN operator TEXT.`,
      );
    }
  } catch (error) {
    await store.close().catch(() => undefined);
    if (db.isOpen) db.close();
    throw error;
  }
  return {
    kind: 'sqlite',
    store,
    audit,
    auditNote: hasAudit ? undefined : `no audit table ${auditTable} in ${path}`,
    auditName: hasAudit ? `${auditTable} in ${path}` : undefined,
    close: async () => {
      await audit?.close();
      await store.close();
      if (db.isOpen) db.close();
    },
  };
}

async function openRedis(
  url: string,
  options: StoreOptions,
  timeoutMs: number,
): Promise<OpenedStore> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: unknown;
  redis.on('error', (error) => {
    // ioredis rejects connect() with "Connection is closed"; the cause comes here.
    lastError = error;
  });
  try {
    await withTimeout(redis.connect(), timeoutMs, 'connect');
    await withTimeout(redis.ping(), timeoutMs, 'PING');
  } catch (error) {
    redis.disconnect();
    throw new CliError(
      EXIT.unavailable,
      `Redis is unreachable at ${redactUrl(url)}: ${reason(lastError ?? error)}. Check that it is up and the URL is right.`,
    );
  }
  let store: ReturnType<typeof createRedisStore>;
  try {
    store = createRedisStore(redis, {
      ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
      notifications: 'off',
    });
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  return {
    kind: 'redis',
    store,
    audit: undefined,
    auditNote: 'Redis keeps no audit log (use the SQLite or PostgreSQL audit log)',
    auditName: undefined,
    close: async () => {
      await store.close();
      redis.disconnect();
    },
  };
}

async function openPostgres(
  url: string,
  options: StoreOptions,
  timeoutMs: number,
): Promise<OpenedStore> {
  const schema = checkName('--schema', options.schema ?? 'public', PG_NAME);
  const table = checkName('--table', options.table ?? 'idempotency_records', PG_NAME);
  const auditTable = checkName('--audit-table', options.auditTable ?? 'idempotency_audit', PG_NAME);
  const pool = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis: timeoutMs });
  pool.on('error', () => {
    // An idle connection dropped: the next query reports it.
  });
  const fail = async (code: number, message: string): Promise<never> => {
    await pool.end().catch(() => undefined);
    throw new CliError(code, message);
  };
  try {
    await withTimeout(pool.query('SELECT 1'), timeoutMs, 'connect');
  } catch (error) {
    return fail(
      EXIT.unavailable,
      `PostgreSQL is unreachable at ${redactUrl(url)}: ${reason(error)}. Check that it is up and the URL is right.`,
    );
  }
  let store: ReturnType<typeof createPostgresStore>;
  try {
    store = createPostgresStore(pool, { schema, table, notifications: false });
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
  const exists = async (name: string) =>
    (await pool.query('SELECT to_regclass($1) AS found', [`"${schema}"."${name}"`])).rows[0]
      ?.found !== null;
  if (!(await exists(table))) {
    return fail(
      EXIT.unavailable,
      `No table ${schema}.${table} in the database: run store.ensureSchema() (or sql/schema.sql), or pass --schema / --table.`,
    );
  }
  const found = await exists(auditTable);
  const hasAudit = found || options.auditWrite === true;
  const audit = hasAudit
    ? createPostgresAuditLog(pool, {
        schema,
        table: auditTable,
        retentionMs: options.auditRetentionMs ?? FOREVER,
        ...(options.onAuditError === undefined ? {} : { onError: options.onAuditError }),
      })
    : undefined;
  if (audit !== undefined && options.auditWrite === true) {
    // Create the table, or add the operator column to an older one, before anything changes.
    const ready =
      found &&
      (
        await pool.query(
          `SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'operator' AND NOT attisdropped`,
          [`"${schema}"."${auditTable}"`],
        )
      ).rowCount === 1;
    if (!ready) {
      try {
        await audit.ensureSchema();
      } catch (error) {
        return fail(
          EXIT.unavailable,
          `Could not prepare the audit table ${schema}.${auditTable} for the settlement (${found ? 'add its operator column' : 'create it'}): ${reason(error)}. Nothing was changed. Run auditSchemaSql() as the table's owner, or pass --audit-table.`,
        );
      }
    }
  }
  return {
    kind: 'postgres',
    store,
    audit,
    auditNote: hasAudit ? undefined : `no audit table ${schema}.${auditTable}`,
    auditName: hasAudit ? `${schema}.${auditTable}` : undefined,
    close: async () => {
      await audit?.close();
      await store.close();
      await pool.end();
    },
  };
}
