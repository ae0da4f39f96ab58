export {
  ConfigurationError,
  createApprovals,
  createIdempotency,
  DriftError,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  type IdempotencyStore,
  InvalidInputError,
  type ToolPolicy,
} from '@idempotent-tools/core';
export * from './approvals.js';
export * from './idempotent-tools.js';
