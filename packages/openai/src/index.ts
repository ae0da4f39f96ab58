export * from '@idempotent-tools/core';
export {
  AGENTS_DEFAULT_ERROR_OUTPUT,
  type AgentToolOptions,
  wrapAgentTools,
  wrapFunctionTool,
} from './agents.js';
export {
  createToolDispatcher,
  type StandardSchema,
  type ToolDispatcher,
  type ToolDispatcherOptions,
  type ToolHandler,
  type TurnOptions,
  type ValidateFunction,
} from './dispatch.js';
export type { CommonOptions } from './shared.js';
// idempotencyHeaders, idempotentFetch, vendorKey, currentExecutionContext, withExecutionContext
// and the ledger (idempotency.vendorCall) come from core, re-exported above.
