/**
 * `@idempotent-tools/core/adapter-kit`: what a framework adapter is built from. The turn
 * identity contract, option checks, and the parts of running a wrapped call, implemented once;
 * an adapter only maps its framework's shapes onto them. For adapter authors, not for apps.
 */

export { NotAnOutcome } from '../executor/not-an-outcome.js';
export { isWrapped, markWrapped, refuseWrapped } from '../executor/wrapped.js';
export {
  type Adapter,
  type AdapterOptions,
  type AdapterSpec,
  createAdapter,
  type PolicyFieldCheck,
  type ToolTreatment,
} from './adapter.js';
export { refuseUnidentified } from './anonymous-runs.js';
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
  parseSchema,
  type StandardSchema,
  type ValidateFunction,
} from './arguments.js';
export {
  type AskingApproval,
  type AskingApprovalPolicy,
  type AskingApprovalSpec,
  runAsking,
} from './asking-approval.js';
export {
  type AskingAdapter,
  type AskingToolPolicy,
  askByQuestion,
  createAskingAdapter,
  type QuestionChannel,
  runAskingCall,
} from './asking-questions.js';
export { type CallReceipt, type ReceiptedOutcome, runWithReceipt } from './call-receipts.js';
export {
  audienceOf,
  type ContextRegistry,
  createContextRegistry,
  createEscapes,
  drain,
  type Escapes,
  errorText,
  isContentBlocks,
  markContent,
  markOutput,
  mergeSignals,
  relay,
} from './calls.js';
export { type ChatMessage, chatRunReader, createRunEnds, type RunEnds } from './chat-runs.js';
export {
  type ClientTurn,
  type ClientTurnOptions,
  type ClientTurnSpec,
  type ClientTurns,
  checkSessionWindow,
  createClientTurns,
  DEFAULT_SESSION_WINDOW,
} from './client-turns.js';
export {
  type ContentMark,
  type ContentResult,
  contentOutcome,
  contentReply,
  declaresReplayed,
  markContentResult,
  ToolResultError,
} from './content-results.js';
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
  outputsOf,
  presentDefinition,
  type RequestIdentity,
  type ToolErrorOutputOption,
  type ToolHandler,
} from './dispatch-calls.js';
export type {
  ExecutePolicyOf,
  ExecuteToolOptions,
  ExecuteToolSetOptions,
} from './execute-types.js';
export {
  createGatedCalls,
  decidedFirst,
  type GatedCall,
  type GatedCalls,
  type GatedDecision,
  gatedCallOf,
  type InputOptions,
  policyAsks,
  waitingCall,
} from './gated-calls.js';
export { createHeldErrors, type HeldErrors } from './held-errors.js';
export { returnOrThrow } from './outcomes.js';
export {
  type CallInput,
  type CallOutcome,
  orThrow,
  type Prepared,
  type PreparedCall,
  prepareCall,
  runPipeline,
  runPrepared,
  type SettledRun,
  settleRun,
} from './pipeline.js';
export {
  presentTool,
  requireNear,
  type StandardJsonSchema,
  type StandardSchemaOptions,
  type ToolPresentation,
} from './presentation.js';
export {
  type EntrySpec,
  type OwnTool,
  type RegistrySpec,
  registering,
  type ToolEntry,
  wrapEntry,
  wrapRegistry,
} from './registered-tools.js';
export {
  type RepeatableOption,
  type RepeatablePolicy,
  type Repeats,
  schemaHasProperty,
  type TakenRepeat,
} from './repeats.js';
export {
  anchorSources,
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
export { responsesItemSource, responsesTurn } from './responses-items.js';
export {
  boxedOutputs,
  markToolResult,
  toolResultOf,
} from './results.js';
export { createRunnerStop, type RunnerStop } from './runner-stop.js';
export { type RequestHeaders, requestHeader, warnOnce } from './server-calls.js';
export { runSuspendable } from './suspensions.js';
export {
  createTaskAdapter,
  type TaskAdapter,
  type TaskRuns,
  type TaskSpec,
  type TaskWrapOptions,
} from './tasks.js';
export {
  createInstanceAdapter,
  plainDefinition,
  type ToolInstanceOptions,
  type ToolInstanceSpec,
  wrapEachOnce,
  wrapToolInstance,
} from './tool-instances.js';
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
  wrapOneTool,
  wrapToolSet,
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
export {
  deriveTurnId,
  idOf,
  type PerCall,
  type ResolvedTurn,
  type TranscriptEntry,
  type TurnIdentityOptions,
  type TurnResolver,
  type TurnSource,
  type TurnSources,
} from './turn-identity.js';
export { TURN_LINK_TOOL, type TurnLinks } from './turn-links.js';
