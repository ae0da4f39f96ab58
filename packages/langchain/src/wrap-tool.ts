import {
  type ExecutionContext,
  type ExecutorOptions,
  errorForModel,
  executorFrom,
  type Idempotency,
  type IdempotentResult,
  InvalidInputError,
  markReplayed,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import type { CallbackManagerForToolRun } from '@langchain/core/callbacks/manager';
import { isDirectToolOutput, type ToolCall, ToolMessage } from '@langchain/core/messages';
import type { StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import type { InferInteropZodOutput, InteropZodType } from '@langchain/core/utils/types';
import { deriveTurnId } from './turn-id.js';

/** What a `turnId` or `scope` function is given about one tool call. */
export interface CallContext {
  toolName: string;
  /** The arguments, as parsed by the tool's schema. */
  args: unknown;
  /** The model's tool call (`id`, `name`, `args`), when the tool was called with one. */
  toolCall: ToolCall | undefined;
  /** The graph state the tool runs in (`messages`, ...), when a tool node runs it. */
  state: Record<string, unknown> | undefined;
  /** The call's config: `configurable` (`thread_id`), `context`, `metadata`, ... */
  config: ToolRunnableConfig;
}

export type { ExecutorOptions };

/** How calls are identified and marked; shared by every entry point. */
export interface WrapOptions {
  /**
   * The conversation turn: a string, or a function of the call (returning undefined falls back
   * to the derived id). Never the tool-call id: it is new on every retry.
   * @default the thread id (`configurable.thread_id`) and the id of the last human message in
   * the state, or a hash of the conversation up to it when it has no id (`deriveTurnId`)
   */
  turnId?: string | ((context: CallContext) => string | undefined);
  /**
   * Tenant / user: records of one scope are never replayed in another.
   * @default undefined (one global scope)
   */
  scope?: string | ((context: CallContext) => string | undefined);
  /**
   * Also mark fresh results in the content the model reads (`replayed: false`).
   * @default false
   */
  markFresh?: boolean;
}

/**
 * A LangChain tool, as the wrappers accept it at compile time (`tool()`, `StructuredTool`,
 * `DynamicStructuredTool`, `DynamicTool`); checked fully at run time.
 */
export interface ToolLike {
  name: string;
  description: string;
  lc_namespace: string[];
}

/** The arguments of a tool, after its schema parsed them. */
export type ToolArgs<T> =
  T extends StructuredToolInterface<infer S>
    ? S extends InteropZodType
      ? InferInteropZodOutput<S>
      : unknown
    : unknown;

/** Options of `idempotentTool(tool, options)`. */
export type IdempotentToolOptions<T = ToolLike> = ExecutorOptions &
  WrapOptions & {
    /**
     * The tool's policy: `ttl`, `lease`, `businessKey`, `reconcile`, `onStale`, `isTerminalError`...
     * @default {} (the executor's defaults)
     */
    policy?: ToolPolicy<ToolArgs<T>>;
    /**
     * Leave the tool unguarded (every call runs) and add the "not safe to retry" note.
     * @default false
     */
    unsafe?: boolean;
  };

/** What `ToolMessage.metadata.idempotency` holds for code (the model reads the content). */
export interface IdempotencyMetadata {
  key: string | undefined;
  /** True when the tool did not run for this call: the content is the stored outcome. */
  replayed: boolean;
  /** `executed`, `replayed`, `waited`, `reconciled`, or `error` (an idempotency error). */
  outcome: IdempotentResult<unknown>['outcome'] | 'error';
  /** The idempotency error's code, when `outcome` is `error`. */
  error?: string;
}

const WRAPPED = Symbol.for('idempotent-tools.langchain.wrapped');

/** True for a tool made by `idempotentTool`, `idempotentTools` or the middleware. */
export function isIdempotentTool(tool: unknown): boolean {
  return tool !== null && typeof tool === 'object' && Object.hasOwn(tool, WRAPPED);
}

/** Where the idempotency key is put in the tool's config: read it with `getIdempotencyKey`. */
const KEY_FIELD = 'idempotency_key';

/** The idempotency key of the running call, to send on as the vendor's `Idempotency-Key`. */
export function getIdempotencyKey(config: ToolRunnableConfig | undefined): string | undefined {
  const key = config?.configurable?.[KEY_FIELD];
  return typeof key === 'string' ? key : undefined;
}

/** `ToolMessage.metadata.idempotency` of a message made by a wrapped tool. */
export function idempotencyOf(message: unknown): IdempotencyMetadata | undefined {
  if (!ToolMessage.isInstance(message)) return undefined;
  return message.metadata?.idempotency as IdempotencyMetadata | undefined;
}

type CallFn = (
  arg: unknown,
  runManager?: CallbackManagerForToolRun,
  config?: ToolRunnableConfig,
) => unknown;
type Callable = StructuredToolInterface & {
  _call: CallFn;
  metadata?: Record<string, unknown>;
  responseFormat?: string;
};

/** Validate the shared options once; returns the executor. */
export function executorOf(options: ExecutorOptions & WrapOptions, caller: string): Idempotency {
  const idempotency = executorFrom(options, caller);
  for (const field of ['turnId', 'scope'] as const) {
    const value = (options as WrapOptions)[field];
    if (value !== undefined && typeof value !== 'string' && typeof value !== 'function') {
      throw new InvalidInputError({
        field,
        message: `${field} must be a string or a function (context) => string | undefined.`,
      });
    }
  }
  return idempotency;
}

/** Throw unless `tool` is a LangChain tool (`tool()`, `StructuredTool`, `DynamicStructuredTool`). */
export function checkTool(tool: unknown, caller: string): asserts tool is Callable {
  const t = tool as Partial<Callable> | null;
  if (t === null || typeof t !== 'object' || typeof t._call !== 'function') {
    throw new InvalidInputError({
      field: 'tool',
      message: `${caller} takes LangChain tools (made with tool(), or StructuredTool / DynamicStructuredTool instances); got ${t === null ? 'null' : typeof t}.`,
    });
  }
  if (typeof t.name !== 'string' || t.name === '') {
    throw new InvalidInputError({
      field: 'toolName',
      message: `${caller}: the tool has no name. Give it one: tool(fn, { name: 'create_ticket', ... }).`,
    });
  }
}

const isBlocks = (content: unknown): content is object[] =>
  Array.isArray(content) &&
  content.every((block) => block !== null && typeof block === 'object' && 'type' in block);

/** The content with its replay marker (content blocks get one more text block). */
function mark(content: unknown, replayed: boolean, markFresh: boolean): unknown {
  if (!replayed && !markFresh) return content;
  if (isBlocks(content)) return [...content, { type: 'text', text: JSON.stringify({ replayed }) }];
  return markReplayed(content, replayed, { markFresh });
}

/** The ToolMessage content of a value, as `@langchain/core` formats tool outputs. */
function toContent(value: unknown): ToolMessage['content'] {
  if (typeof value === 'string' || isBlocks(value)) return value as ToolMessage['content'];
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return String(value);
  }
}

async function drain(value: unknown, runManager?: CallbackManagerForToolRun): Promise<unknown> {
  const gen = value as AsyncGenerator<unknown, unknown> | null;
  if (gen === null || typeof gen !== 'object' || typeof gen.next !== 'function') return value;
  if (typeof gen[Symbol.asyncIterator] !== 'function') return value;
  for (;;) {
    const step = await gen.next();
    if (step.done) return step.value;
    await runManager?.handleToolEvent?.(step.value);
  }
}

const resolve = (
  option: string | ((context: CallContext) => string | undefined) | undefined,
  context: CallContext,
) => (typeof option === 'function' ? option(context) : option);

/**
 * The tool, made idempotent: an object of the same class (its prototype is the original), with
 * the same name and schema, the retry note in its description, and a `_call` that runs the
 * original once per turn + arguments. Used by `idempotentTool` and the middleware.
 */
export function wrapTool<T extends ToolLike>(
  tool: T,
  idempotency: Idempotency,
  options: WrapOptions,
  how: { policy?: ToolPolicy<never> | undefined; unsafe?: boolean } = {},
): T {
  checkTool(tool, 'idempotentTool');
  if (isIdempotentTool(tool)) return tool;
  const wrapped = Object.create(tool) as Callable;
  Object.defineProperty(wrapped, WRAPPED, { value: true });
  const pair = tool.responseFormat === 'content_and_artifact';
  Object.defineProperty(wrapped, 'description', {
    value: withRetryNote(tool.description, how.unsafe !== true),
    writable: true,
    enumerable: true,
    configurable: true,
  });
  if (how.unsafe === true) return wrapped as unknown as T;
  // Our _call returns the finished ToolMessage, which `call` passes on in 'content' format only.
  wrapped.responseFormat = 'content';
  const original = tool._call;
  const toolName = tool.name;
  const policy = (how.policy ?? {}) as ToolPolicy<unknown>;
  const markFresh = options.markFresh === true;

  wrapped._call = async (args, runManager, parentConfig) => {
    const config = (parentConfig ?? {}) as ToolRunnableConfig & { state?: unknown };
    const scratch = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown };
    const state = (config.state ?? scratch?.currentTaskInput) as
      | Record<string, unknown>
      | undefined;
    const toolCall = config.toolCall;
    const toolCallId = toolCall?.id; // as `call` decides whether to answer with a ToolMessage
    const context: CallContext = { toolName, args, toolCall, state, config };
    const turnId =
      resolve(options.turnId, context) ??
      deriveTurnId({
        messages: state?.messages as unknown[] | undefined,
        threadId: config.configurable?.thread_id,
      });
    if (turnId === undefined && policy.businessKey === undefined) {
      throw new InvalidInputError({
        field: 'turnId',
        message: `${toolName}: no turn id. Run the tool in an agent / graph whose state has messages, or pass turnId (a string or (context) => string). Never the tool-call id alone: it is new on every retry.`,
      });
    }
    const run = (runArgs: unknown, exec: ExecutionContext) =>
      original.call(tool, runArgs, runManager, {
        ...config,
        signal: config.signal ? AbortSignal.any([config.signal, exec.signal]) : exec.signal,
        configurable: { ...config.configurable, [KEY_FIELD]: exec.key },
      });

    let result: IdempotentResult<unknown>;
    try {
      result = await idempotency.run(
        { toolName, turnId, scope: resolve(options.scope, context), args },
        async (runArgs, exec) => drain(await run(runArgs, exec), runManager),
        policy,
      );
    } catch (error) {
      const forModel = errorForModel(error);
      if (forModel === undefined || forModel.error === 'invalid_input' || !toolCallId) throw error;
      const idempotencyMeta: IdempotencyMetadata = {
        key: (error as { key?: string }).key,
        replayed: false,
        outcome: 'error',
        error: forModel.error,
      };
      return new ToolMessage({
        status: 'error',
        content: JSON.stringify(forModel),
        tool_call_id: toolCallId,
        name: toolName,
        metadata: { ...tool.metadata, idempotency: idempotencyMeta },
      });
    }

    const { value, replayed, key, outcome } = result;
    // A ToolMessage or Command the tool built itself goes out as it is (see the README's limits).
    const command = (value as { lg_name?: unknown } | null)?.lg_name === 'Command';
    if (!replayed && (isDirectToolOutput(value) || command)) return value;
    if (pair && !(Array.isArray(value) && value.length === 2)) return value;
    const [content, artifact] = pair ? (value as [unknown, unknown]) : [value, undefined];
    const marked = mark(content, replayed, markFresh);
    if (!toolCallId) return marked; // as `call` does without a tool call: the content only
    const idempotencyMeta: IdempotencyMetadata = { key, replayed, outcome };
    return new ToolMessage({
      status: 'success',
      content: toContent(marked),
      artifact,
      tool_call_id: toolCallId,
      name: toolName,
      metadata: { ...tool.metadata, idempotency: idempotencyMeta },
    });
  };
  return wrapped as unknown as T;
}
