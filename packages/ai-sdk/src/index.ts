export {
  ConfigurationError,
  createIdempotency,
  DriftError,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  type IdempotencyStore,
  InvalidInputError,
  type ToolPolicy,
} from '@idempotent-tools/core';
export {
  type IdempotentToolOptions,
  type IdempotentToolsOptions,
  idempotencyContext,
  idempotentTool,
  idempotentTools,
  type PerCall,
  type PolicyOf,
  type ToolCallInfo,
  type ToolContext,
  type WrapOptions,
} from './idempotent-tools.js';
