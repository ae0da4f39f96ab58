export * from '@idempotent-tools/core';
export {
  type IdempotentToolsMiddlewareOptions,
  type IdempotentToolsOptions,
  idempotentTool,
  idempotentTools,
} from './tools.js';
export { deriveTurnId } from './turn-id.js';
export {
  type CallContext,
  type ExecutorOptions,
  getIdempotencyKey,
  type IdempotencyMetadata,
  type IdempotentToolOptions,
  idempotencyOf,
  isIdempotentTool,
  type ToolArgs,
  type ToolLike,
  type WrapOptions,
} from './wrap-tool.js';
