// The names of @idempotent-tools/core a user of this store needs with it: the executor, what the
// examples built on this store take with it (approvals, what the model sees, IdempotencyError,
// events), the types of the store's own signatures. Everything else comes from core itself.
export {
  type Approval,
  type AuditLog,
  type AuditPage,
  type AuditQuery,
  type AuditStats,
  type AuditStatsFilter,
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  createApprovals,
  createIdempotency,
  errorForModel,
  IdempotencyError,
  type IdempotencyEvent,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListFilter,
  markReplayed,
  type RecordPage,
  type StatsFilter,
  type StoreStats,
  type TakeoverInput,
} from '@idempotent-tools/core';
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
