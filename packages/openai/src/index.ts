// The Agents SDK wrappers are on their own entry, `@idempotent-tools/openai/agents` (their types
// name `@openai/agents`, an optional peer). From core: the executor, the types of the signatures,
// the errors a wrapper throws, the vendor-call helpers (`idempotency.vendorCall` is the executor's).
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
