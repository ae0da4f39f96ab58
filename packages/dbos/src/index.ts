export {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  currentExecutionContext,
  DriftError,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  IdempotencyError,
  type IdempotencyStore,
  InvalidInputError,
  idempotencyHeaders,
  idempotentFetch,
  OutcomeUnknownError,
  type ToolPolicy,
} from '@idempotent-tools/core';
export { type IdempotentStepOptions, idempotentStep, type StepCall } from './steps.js';
