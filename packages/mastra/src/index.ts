export * from '@idempotent-tools/core';
export {
  type AnyTool,
  type IdempotentToolOptions,
  type IdempotentToolsOptions,
  idempotencyContext,
  idempotentTool,
  idempotentTools,
  type PerCall,
  type PolicyOf,
  type ToolCallInfo,
} from './idempotent-tools.js';
