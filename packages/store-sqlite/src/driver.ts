import { resolve } from 'node:path';
import { InvalidInputError } from '@idempotent-tools/core';

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Check a table name of the store or the audit log (`InvalidInputError` naming `table`). */
export function checkTableName(table: unknown): string {
  if (typeof table !== 'string' || !TABLE_NAME.test(table) || /^sqlite_/i.test(table)) {
    throw new InvalidInputError({
      field: 'table',
      message: `table must be 1-63 letters, digits or _, not starting with a digit or sqlite_, got ${JSON.stringify(table)}.`,
    });
  }
  return table;
}

/** A value the store binds: both drivers take these as positional parameters. */
export type SqlValue = string | number | null;

/**
 * A prepared statement as the store sees it (node:sqlite `StatementSync`, better-sqlite3
 * `Statement`). The public types below are looser (`never[]`) so both libraries' own typings fit.
 */
export interface Statement {
  run(...params: SqlValue[]): { changes: number | bigint };
  get(...params: SqlValue[]): unknown;
  all(...params: SqlValue[]): unknown[];
}

/** Structural type of a driver's prepared statement. */
export interface SqliteStatementLike {
  run(...params: never[]): unknown;
  get(...params: never[]): unknown;
  all(...params: never[]): unknown;
}

/**
 * A SQLite connection: a `node:sqlite` `DatabaseSync` or a `better-sqlite3` `Database`. Typed
 * structurally so neither package's types are needed to use the store.
 */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
  close(): unknown;
}

/** Which library the connection comes from. */
export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3';

/** The two drivers behind one face: positional params, plain numbers, one open check. */
export interface Driver {
  readonly name: SqliteDriverName;
  /** Absolute path of the main database file, or undefined for an in-memory database. */
  readonly file: string | undefined;
  isOpen(): boolean;
  prepare(sql: string): Statement;
  exec(sql: string): void;
}

interface NodeDatabase {
  prepare(sql: string): unknown;
  exec(sql: string): unknown;
  /** Node >= 22.15. */
  readonly isOpen?: boolean;
  /** Node >= 24. */
  location?(): string | null;
}
interface NodeStatement extends Statement {
  setReadBigInts(enabled: boolean): void;
}
interface BetterDatabase {
  prepare(sql: string): unknown;
  exec(sql: string): unknown;
  readonly open: boolean;
  readonly memory: boolean;
  readonly name: string;
  pragma(source: string): unknown;
}
interface BetterStatement extends Statement {
  readonly reader: boolean;
  safeIntegers(enabled: boolean): unknown;
}

/**
 * Tell the drivers apart: better-sqlite3 has `pragma()` and an `open` flag; node:sqlite has
 * `isOpen` and `location()`. Both bind `?` parameters positionally and return rows as objects;
 * they differ in integers (both may be set to return `bigint`: turned off per statement), in the
 * open flag and in their errors (see `sqliteCode`).
 */
export function toDriver(db: unknown): Driver {
  const candidate = db as Partial<NodeDatabase & BetterDatabase> | null;
  const usable =
    candidate !== null &&
    typeof candidate === 'object' &&
    typeof candidate.prepare === 'function' &&
    typeof candidate.exec === 'function';
  if (usable && typeof candidate.pragma === 'function' && 'memory' in candidate) {
    const better = candidate as BetterDatabase;
    return {
      name: 'better-sqlite3',
      file: better.memory || better.name === '' ? undefined : resolve(better.name),
      isOpen: () => better.open,
      prepare: (sql) => {
        const statement = better.prepare(sql) as BetterStatement;
        if (statement.reader) statement.safeIntegers(false);
        return statement;
      },
      exec: (sql) => void better.exec(sql),
    };
  }
  if (usable && isNodeDatabase(candidate)) {
    const node = candidate as NodeDatabase;
    let location: string | null | undefined;
    try {
      location = node.location?.();
    } catch {
      location = undefined; // closed: the store reports it on first use
    }
    return {
      name: 'node:sqlite',
      file: location === null || location === '' ? undefined : location,
      // Before Node 22.15 there is no isOpen: a closed connection shows in its errors instead.
      isOpen: () => node.isOpen ?? true,
      prepare: (sql) => {
        const statement = node.prepare(sql) as NodeStatement;
        statement.setReadBigInts(false);
        return statement;
      },
      exec: (sql) => void node.exec(sql),
    };
  }
  throw new InvalidInputError({
    field: 'db',
    message:
      "createSqliteStore needs a node:sqlite DatabaseSync or a better-sqlite3 Database, e.g. createSqliteStore(new DatabaseSync('agent.db')).",
  });
}

/** A `DatabaseSync`, checked without loading `node:sqlite` for better-sqlite3 users. */
function isNodeDatabase(candidate: object): boolean {
  if ('isOpen' in candidate && 'location' in candidate) return true;
  try {
    const sqlite = process.getBuiltinModule?.('node:sqlite');
    return sqlite !== undefined && candidate instanceof sqlite.DatabaseSync;
  } catch {
    return false;
  }
}

const CODE_NAMES: Record<number, string> = {
  1: 'SQLITE_ERROR',
  3: 'SQLITE_PERM',
  5: 'SQLITE_BUSY',
  6: 'SQLITE_LOCKED',
  7: 'SQLITE_NOMEM',
  8: 'SQLITE_READONLY',
  10: 'SQLITE_IOERR',
  11: 'SQLITE_CORRUPT',
  13: 'SQLITE_FULL',
  14: 'SQLITE_CANTOPEN',
  15: 'SQLITE_PROTOCOL',
  21: 'SQLITE_MISUSE',
  23: 'SQLITE_AUTH',
  26: 'SQLITE_NOTADB',
};

/**
 * The SQLite result code of a driver error, e.g. `SQLITE_BUSY`: better-sqlite3 puts the name in
 * `code`, node:sqlite the number in `errcode`. `SQLITE_CLOSED` for a closed connection or a
 * statement finalised by it; undefined when the error is not SQLite's.
 */
export function sqliteCode(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const e = error as { code?: unknown; errcode?: unknown; message?: unknown };
  if (typeof e.code === 'string' && e.code.startsWith('SQLITE_')) return e.code;
  if (typeof e.errcode === 'number') {
    const primary = e.errcode & 0xff;
    return CODE_NAMES[primary] ?? `SQLITE_${primary}`;
  }
  const message = typeof e.message === 'string' ? e.message : '';
  if (/database (connection )?is not open|statement has been finalized/i.test(message)) {
    return 'SQLITE_CLOSED';
  }
  return undefined;
}

/** The lock is held by another connection: wait and try again. */
export function isBusy(code: string | undefined): boolean {
  return code !== undefined && /^SQLITE_(BUSY|LOCKED)/.test(code);
}
