export * from '@idempotent-tools/core';
export {
  type StandardSchema,
  TURN_LINK_TOOL,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
// The Agents SDK wrappers are on their own entry, `@idempotent-tools/openai/agents`: their types
// name `@openai/agents`, an optional peer a Chat Completions or Responses user does not install.
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
