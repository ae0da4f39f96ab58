export * from '@idempotent-tools/core';
export {
  auditSchemaSql,
  createPostgresAuditLog,
  PostgresAuditLog,
  type PostgresAuditLogOptions,
} from './audit-log.js';
export type {
  PgListenClient,
  PgNotification,
  PgQueryable,
  PgQueryConfig,
  PgQueryResult,
} from './change-listener.js';
export {
  createPostgresStore,
  PostgresStore,
  type PostgresStoreOptions,
} from './postgres-store.js';
export {
  DEFAULT_SCHEMA,
  DEFAULT_TABLE,
  type ResolvedNames,
  schemaSql,
  type TableNames,
} from './schema.js';
