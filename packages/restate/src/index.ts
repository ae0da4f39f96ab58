export {
  createIdempotency,
  createMemoryStore,
  DriftError,
  type ExecutionContext,
  type Idempotency,
  IdempotencyError,
  type IdempotencyStore,
  InvalidInputError,
  idempotencyHeaders,
  idempotentFetch,
  OutcomeUnknownError,
  type ToolPolicy,
} from '@idempotent-tools/core';
export {
  type IdempotentRunOptions,
  idempotentRun,
  type RunArgs,
  runKey,
} from './run.js';
