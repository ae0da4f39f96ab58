export * from '@idempotent-tools/core';
export {
  IDEMPOTENCY_KEY_META,
  type IdempotentServerOptions,
  idempotencyContext,
  idempotentRegisterTool,
  idempotentServer,
  type McpToolPolicy,
  type PerCall,
  REPLAYED_META,
  type ToolCallInfo,
  type ToolExtra,
  ToolResultError,
  TURN_ID_META,
} from './idempotent-server.js';
