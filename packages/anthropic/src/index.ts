export * from '@idempotent-tools/core';
export type { StandardSchema, ValidateFunction } from '@idempotent-tools/core/adapter-kit';
export {
  createToolDispatcher,
  type DispatchCall,
  type ToolDispatcher,
  type ToolDispatcherOptions,
  type ToolHandler,
  type TurnOptions,
} from './dispatch.js';
export {
  type IdempotentToolRunnerOptions,
  idempotentToolRunner,
  type RunnerCall,
} from './tool-runner.js';
