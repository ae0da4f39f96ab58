export {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  DriftError,
  type ExecutorOptions,
  type Idempotency,
  IdempotencyError,
  type IdempotencyStore,
  type IdempotentResult,
  InvalidInputError,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  type ToolPolicy,
} from '@idempotent-tools/core';
export type { PerCall, RepeatablePolicy } from '@idempotent-tools/core/adapter-kit';
export { deriveTurnId } from './identity.js';
export { idempotentTool, idempotentTools } from './tools.js';
export type {
  CallContext,
  IdempotencyMetadata,
  IdempotentToolOptions,
  IdempotentToolsMiddlewareOptions,
  IdempotentToolsOptions,
  ToolArgs,
  ToolLike,
  WrapOptions,
} from './types.js';
export { getIdempotencyKey, idempotencyOf, isIdempotentTool } from './wrap-tool.js';
