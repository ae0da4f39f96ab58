export * from '@idempotent-tools/core';
export { deriveTurnId } from './identity.js';
export { idempotentTool, idempotentTools } from './tools.js';
export type {
  CallContext,
  ExecutorOptions,
  IdempotencyMetadata,
  IdempotentToolOptions,
  IdempotentToolsMiddlewareOptions,
  IdempotentToolsOptions,
  ToolArgs,
  ToolLike,
  WrapOptions,
} from './types.js';
export { getIdempotencyKey, idempotencyOf, isIdempotentTool } from './wrap-tool.js';
