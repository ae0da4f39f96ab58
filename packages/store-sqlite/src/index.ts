export * from '@idempotent-tools/core';
export {
  createSqliteAuditLog,
  SqliteAuditLog,
  type SqliteAuditLogOptions,
} from './audit-log.js';
export type {
  SqliteDatabaseLike,
  SqliteDriverName,
  SqliteStatementLike,
} from './driver.js';
export {
  createSqliteStore,
  openSqliteStore,
  SqliteStore,
  type SqliteStoreOptions,
} from './sqlite-store.js';
