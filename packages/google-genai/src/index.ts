export * from '@idempotent-tools/core';
export type { StandardSchema, ValidateFunction } from '@idempotent-tools/core/adapter-kit';
export {
  type FunctionCallInfo,
  type FunctionHandler,
  type IdempotentFunctions,
  type IdempotentFunctionsOptions,
  idempotentCallableTool,
  idempotentFunctions,
} from './functions.js';
export type { GeminiTurn } from './turns.js';
