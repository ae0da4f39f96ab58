// The names of @idempotent-tools/core a user of this store needs with it (the executor, the
// types of the store's own signatures); everything else of core comes from core itself.
export {
  type AuditLog,
  type AuditPage,
  type AuditQuery,
  type AuditStats,
  type AuditStatsFilter,
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListFilter,
  type RecordPage,
  type StatsFilter,
  type StoreStats,
  type TakeoverInput,
} from '@idempotent-tools/core';
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
