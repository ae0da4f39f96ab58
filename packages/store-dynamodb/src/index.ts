export * from '@idempotent-tools/core';
export {
  createDynamoDbStore,
  DynamoDbStore,
  type DynamoDbStoreOptions,
} from './dynamodb-store.js';
export {
  type EnsureTableOptions,
  type EnsureTableResult,
  ensureTable,
  tableDefinition,
} from './table.js';
