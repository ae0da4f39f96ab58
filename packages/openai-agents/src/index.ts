// The Agents SDK wrappers, and from core: the executor, the types of the signatures, the errors a
// wrapper throws, the vendor-call helpers (`idempotency.vendorCall` is the executor's).
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
export { type RepeatablePolicy, TURN_LINK_TOOL } from '@idempotent-tools/core/adapter-kit';
export {
  AGENTS_DEFAULT_ERROR_OUTPUT,
  type AgentToolOptions,
  wrapAgentTools,
  wrapFunctionTool,
} from './agents.js';
