import { createHash } from 'node:crypto';
import { InvalidInputError } from '@idempotent-tools/core';
import type { Driver } from './driver.js';

/** The schema and table the store uses. */
export interface TableNames {
  /**
   * Schema of the table: lower-case letters, digits and `_`, starting with a letter or `_`, at
   * most 63 characters (`/^[a-z_][a-z0-9_]{0,62}$/`). Always quoted in SQL.
   * @default 'public'
   */
  schema?: string;
  /**
   * Name of the table, same rules as `schema`.
   * @default 'idempotency_records'
   */
  table?: string;
}

export const DEFAULT_SCHEMA = 'public';
export const DEFAULT_TABLE = 'idempotency_records';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

function hash(text: string, hexChars: number): string {
  return createHash('sha256').update(text).digest('hex').slice(0, hexChars);
}

/** Validate a schema / table name (typed error otherwise). */
export function checkIdentifier(field: string, value: unknown): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
    throw new InvalidInputError({
      field,
      message: `${field} must match /^[a-z_][a-z0-9_]{0,62}$/ (lower-case letters, digits and _, at most 63 characters), got ${JSON.stringify(value)}. Pick a plain lower-case name.`,
    });
  }
  return value;
}

/** Quote an identifier for SQL. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The name of an index of `table` (unquoted): `table` + `suffix`, shortened with a hash past the
 * 63 bytes PostgreSQL keeps of a name, so two long table names in one schema never share one.
 */
export function indexName(table: string, suffix: string): string {
  if (table.length + suffix.length <= 63) return `${table}${suffix}`;
  return `${table.slice(0, 63 - suffix.length - 9)}_${hash(table, 8)}${suffix}`;
}

/** The key of the advisory lock that serialises the DDL named `label`. */
export function advisoryLockKey(label: string): bigint {
  return BigInt.asIntN(64, BigInt(`0x${hash(label, 16)}`));
}

/**
 * The DDL that creates `schema` when it is not the default one (nothing for `public`). CREATE
 * SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists: this does not.
 */
export function createSchemaSql(schema: string): string {
  return schema === DEFAULT_SCHEMA
    ? ''
    : `DO $$
BEGIN
  IF to_regnamespace('${schema}') IS NULL THEN
    CREATE SCHEMA ${quoteIdent(schema)};
  END IF;
END
$$;

`;
}

/**
 * Run the DDL `script` after taking the advisory lock `lockKey` (one implicit transaction): safe
 * from many processes at once. A creator that does not take the lock (a migration) can still
 * race it on pg_type: that is tried again. Rejects with the driver's error otherwise.
 */
export async function runLockedDdl(db: Driver, lockKey: bigint, script: string): Promise<void> {
  const text = `SELECT pg_advisory_xact_lock('${lockKey}'::bigint);\n${script}`;
  for (let attempt = 1; ; attempt++) {
    try {
      // No parameters: one simple-protocol round trip, run as one implicit transaction.
      return await db.script(text);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if ((code === '23505' || code === '42P07') && attempt < 3) continue;
      throw error;
    }
  }
}

/** Whether a driver error says the table (or its schema) does not exist. */
export function isMissingTable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '42P01' || code === '3F000';
}

/** Resolved names of everything the store creates and uses. */
export interface ResolvedNames {
  schema: string;
  table: string;
  /** `"schema"."table"`. */
  qualified: string;
  /** Unquoted index name (at most 63 bytes). */
  index: string;
  /** Default LISTEN/NOTIFY channel (at most 63 bytes). */
  channel: string;
  /** Key of the advisory lock that serialises `ensureSchema` for this table. */
  lockKey: bigint;
}

export function resolveNames(names: TableNames = {}): ResolvedNames {
  const schema = checkIdentifier('schema', names.schema ?? DEFAULT_SCHEMA);
  const table = checkIdentifier('table', names.table ?? DEFAULT_TABLE);
  const index = indexName(table, '_expires_at_idx');
  const readable = `idempotent_tools.${schema}.${table}`;
  const channel =
    readable.length <= 63 ? readable : `idempotent_tools.${hash(`${schema}.${table}`, 32)}`;
  const lockKey = advisoryLockKey(`idempotent-tools/ensure-schema/${schema}.${table}`);
  return {
    schema,
    table,
    qualified: `${quoteIdent(schema)}.${quoteIdent(table)}`,
    index,
    channel,
    lockKey,
  };
}

/**
 * The DDL of the store's table, as plain SQL for your migrations. Idempotent: every statement is
 * `IF NOT EXISTS`. `sql/schema.sql` in the package holds it for the default names.
 *
 * ```ts
 * await pool.query(schemaSql({ schema: 'app', table: 'tool_calls' }));
 * ```
 */
export function schemaSql(names: TableNames = {}): string {
  const { schema, qualified, index } = resolveNames(names);
  return `-- Table of @idempotent-tools/store-postgres. Times are milliseconds since the Unix epoch
-- on the database clock; outcome is the executor's serialised result, kept byte-exact.
${createSchemaSql(schema)}CREATE TABLE IF NOT EXISTS ${qualified} (
  key text COLLATE "C" PRIMARY KEY,
  state text NOT NULL CHECK (state IN ('in_progress', 'completed', 'failed')),
  fingerprint text NOT NULL,
  token text NOT NULL,
  lease_expires_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  created_at bigint NOT NULL,
  completed_at bigint,
  outcome text,
  tool_name text,
  scope text,
  turn_id text,
  waiting boolean NOT NULL DEFAULT false
);

-- Set by a waiter in another process: complete / release send NOTIFY only then (0.1 tables).
ALTER TABLE ${qualified} ADD COLUMN IF NOT EXISTS waiting boolean NOT NULL DEFAULT false;

CREATE INDEX IF NOT EXISTS ${quoteIdent(index)} ON ${qualified} (expires_at);
`;
}
