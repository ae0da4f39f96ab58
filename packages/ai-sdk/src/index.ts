export * from '@idempotent-tools/core';
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
