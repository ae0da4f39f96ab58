// The dispatcher, and from core: the executor, the types of the signatures, the errors a wrapper
// throws, the vendor-call helpers (`idempotency.vendorCall` is the executor's). The Agents SDK's
// wrappers are `@idempotent-tools/openai-agents`.
export {
  ConfigurationError,
  createIdempotency,
  currentExecutionContext,
  type ExecutionContext,
  type Idempotency,
  type IdempotencyOptions,
  idempotencyHeaders,
  idempotentFetch,
  type ToolPolicy,
  vendorKey,
  withExecutionContext,
} from '@idempotent-tools/core';
export {
  type DispatchCall,
  type RepeatablePolicy,
  type StandardSchema,
  type ToolHandler,
  TURN_LINK_TOOL,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
export {
  createToolDispatcher,
  type ToolDispatcher,
  type ToolDispatcherOptions,
  type TurnOptions,
} from './dispatch.js';
