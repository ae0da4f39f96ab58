/**
 * `@idempotent-tools/core/adapter-kit`: what a framework adapter is built from. The turn
 * identity contract, option checks, and the parts of running a wrapped call, implemented once;
 * an adapter only maps its framework's shapes onto them. For adapter authors, not for apps.
 */

export { unknownOption } from '../errors/option-names.js';
export { NotAnOutcome } from '../executor/not-an-outcome.js';
export { isWrapped, markWrapped, refuseWrapped, wrappedTwice } from '../executor/wrapped.js';
export {
  type Adapter,
  type AdapterOptions,
  type AdapterSpec,
  callOf,
  checkToolName,
  createAdapter,
  type PolicyFieldCheck,
  type ToolTreatment,
} from './adapter.js';
export {
  APPROVAL_DECISION_SCHEMA,
  type ApprovalDecision,
  type ApprovalRequest,
  type ApprovalTask,
  type ApprovalTaskOptions,
  type ApprovalTaskSpec,
  createApprovalTask,
  isApprovalRequest,
} from './approval-tasks.js';
export {
  parseArguments,
  parseSchema,
  type StandardSchema,
  type ValidateFunction,
} from './arguments.js';
export {
  type AskingApproval,
  type AskingApprovalPolicy,
  type AskingApprovalSpec,
  askingApprovalField,
  runAsking,
} from './asking-approval.js';
export {
  audienceOf,
  type ContextRegistry,
  createContextRegistry,
  createEscapes,
  drain,
  type Escapes,
  errorText,
  invalidArgumentsText,
  isAsyncIterable,
  isContentBlocks,
  markContent,
  markOutput,
  mergeSignals,
  relay,
  replayMarkBlock,
  unwrappedContext,
} from './calls.js';
export {
  createDispatcher,
  type DefinitionOptions,
  type DispatchCall,
  type DispatchedCall,
  type Dispatcher,
  type DispatcherOptions,
  type DispatchHandler,
  type DispatchOptions,
  type DispatchOutcome,
  dispatchCalls,
  outputsOf,
  presentDefinition,
  type RequestIdentity,
  requestIdentity,
  type ToolErrorOutputOption,
  type ToolHandler,
} from './dispatch-calls.js';
export { errorOutcome, returnOrThrow } from './outcomes.js';
export {
  type CallInput,
  type CallOutcome,
  orThrow,
  type Prepared,
  type PreparedCall,
  prepareCall,
  runCall,
  runPipeline,
  runPrepared,
  type SettledRun,
  settleCall,
  settlePipeline,
  settleRun,
} from './pipeline.js';
export {
  presentTool,
  type StandardJsonSchema,
  type StandardSchemaOptions,
  type ToolPresentation,
} from './presentation.js';
export {
  DEFAULT_REPEAT_ARGUMENT,
  keyArgs,
  type RepeatableOption,
  type RepeatablePolicy,
  type Repeats,
  repeatClash,
  repeatNote,
  repeatProperty,
  repeatsOf,
  schemaHasProperty,
  type TakenRepeat,
  takeRepeat,
  withRepeatNote,
  withRepeatProperty,
} from './repeats.js';
export {
  anchorSources,
  createEmittedCalls,
  createRequestTurns,
  type EmittedCall,
  type EmittedCalls,
  type LinkedCall,
  type ModelCall,
  type ObservedMethod,
  type RequestTurn,
  type RequestTurns,
  type TurnAnchor,
} from './request-turns.js';
export {
  boxedOutputs,
  boxOutput,
  markToolResult,
  toolResultContent,
  toolResultOf,
  unboxOutput,
} from './results.js';
export { createRunnerStop, type RunnerStop } from './runner-stop.js';
export {
  createTaskAdapter,
  type TaskAdapter,
  type TaskRuns,
  type TaskSpec,
  type TaskWrapOptions,
} from './tasks.js';
export { runToolCall, type ToolCall } from './tool-call.js';
export {
  copyTool,
  createToolListAdapter,
  createToolSetAdapter,
  type OneToolOptions,
  type OneToolWrapperOptions,
  oneToolOptions,
  type ToolListSpec,
  type ToolSetOptions,
  type ToolSetSpec,
  type ToolSetWrapperOptions,
  type ToolWrapOptions,
} from './tool-set.js';
export {
  type MessageSource,
  type RunMessageKind,
  type RunReader,
  readRuns,
  readTranscript,
  roleSource,
  type TranscriptReader,
} from './transcripts.js';
export { userContent } from './turn-content.js';
export {
  checkPerCall,
  createTurnResolver,
  deriveTurnId,
  type PerCall,
  type ResolvedTurn,
  type TranscriptEntry,
  type TurnIdentityOptions,
  type TurnResolver,
  type TurnSource,
  type TurnSources,
} from './turn-identity.js';
export { createTurnLinks, TURN_LINK_TOOL, type TurnLinks } from './turn-links.js';
