export * from '@idempotent-tools/core';
export {
  type StandardSchema,
  TURN_LINK_TOOL,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
export {
  AGENTS_DEFAULT_ERROR_OUTPUT,
  type AgentToolOptions,
  wrapAgentTools,
  wrapFunctionTool,
} from './agents.js';
export {
  createToolDispatcher,
  type DispatchCall,
  type ToolDispatcher,
  type ToolDispatcherOptions,
  type ToolHandler,
  type TurnOptions,
} from './dispatch.js';
// idempotencyHeaders, idempotentFetch, vendorKey, currentExecutionContext, withExecutionContext
// and the ledger (idempotency.vendorCall) come from core, re-exported above.
