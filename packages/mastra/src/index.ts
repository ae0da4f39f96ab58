export * from '@idempotent-tools/core';
export {
  approveToolCall,
  approveToolCallGenerate,
  declineToolCall,
  declineToolCallGenerate,
  getToolCallApproval,
  recordToolCallDecision,
  type SuspendedToolCall,
  type ToolCallDecider,
} from './approvals.js';
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
