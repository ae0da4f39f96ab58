export {
  ConfigurationError,
  createIdempotency,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  idempotencyHeaders,
  idempotentFetch,
  type ToolPolicy,
} from '@idempotent-tools/core';
export type {
  RepeatablePolicy,
  StandardSchema,
  ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
export {
  type FunctionCallInfo,
  type FunctionHandler,
  type IdempotentFunctions,
  type IdempotentFunctionsOptions,
  idempotentCallableTool,
  idempotentFunctions,
} from './functions.js';
export type { GeminiTurn } from './turns.js';
