export {
  ConfigurationError,
  createIdempotency,
  type ExecutionContext,
  type ExecutorOptions,
  type Idempotency,
  type ToolPolicy,
} from '@idempotent-tools/core';
export type {
  DispatchCall,
  RepeatablePolicy,
  RequestIdentity as TurnOptions,
  StandardSchema,
  ToolHandler,
  ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
export {
  createToolDispatcher,
  type ToolDispatcher,
  type ToolDispatcherOptions,
} from './dispatch.js';
export {
  type IdempotentToolRunnerOptions,
  idempotentToolRunner,
  type RunnerCall,
} from './tool-runner.js';
