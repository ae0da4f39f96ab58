export {
  ConfigurationError,
  createApprovals,
  createIdempotency,
  createMemoryStore,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  type IdempotencyStore,
  InvalidInputError,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  type ToolPolicy,
} from '@idempotent-tools/core';
export * from './idempotent-server.js';
