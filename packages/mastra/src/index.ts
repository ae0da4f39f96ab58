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
