export {
  type Approval,
  ApprovalRejectedError,
  ConfigurationError,
  createApprovals,
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
  OutcomeUnknownError,
  type ToolPolicy,
} from '@idempotent-tools/core';
export {
  type ApprovalDecision,
  type ApprovalRequest,
  isApprovalRequest,
} from '@idempotent-tools/core/adapter-kit';
export {
  type ApprovalTaskOptions,
  approvalTask,
  type IdempotentTaskOptions,
  idempotentTask,
  type TaskCall,
} from './tasks.js';
