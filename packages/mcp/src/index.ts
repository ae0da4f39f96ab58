export * from '@idempotent-tools/core';
export {
  APPROVAL_INPUT_PREFIX,
  type McpApprovalOption,
  type McpApprovalPolicy,
} from './approval.js';
export {
  type CallToolResult,
  DEFAULT_SESSION_WINDOW,
  IDEMPOTENCY_KEY_META,
  type IdempotentServerOptions,
  idempotencyContext,
  idempotentRegisterTool,
  idempotentServer,
  type McpServerLike,
  type McpToolPolicy,
  type PerCall,
  REPLAYED_META,
  type ToolCallInfo,
  type ToolExtra,
  ToolResultError,
  TURN_ID_META,
} from './idempotent-server.js';
