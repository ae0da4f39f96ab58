export * from '@idempotent-tools/core';
export {
  auditSchemaSql,
  createPostgresAuditLog,
  PostgresAuditLog,
  type PostgresAuditLogOptions,
} from './audit-log.js';
export type { DriverName } from './driver.js';
export type {
  PgListenClient,
  PgNotification,
  PgQueryable,
  PgQueryConfig,
  PgQueryResult,
} from './drivers/pg.js';
export type { PgliteLike, PgliteResult } from './drivers/pglite.js';
export type { PostgresJsResult, PostgresJsSql } from './drivers/postgres-js.js';
export {
  createPostgresStore,
  PostgresStore,
  type PostgresStoreOptions,
} from './postgres-store.js';
export { detectDriver, type PostgresClient } from './resolve-driver.js';
export {
  DEFAULT_SCHEMA,
  DEFAULT_TABLE,
  type ResolvedNames,
  schemaSql,
  type TableNames,
} from './schema.js';
