import {
  ConfigurationError,
  errorForModel,
  type IdempotentResult,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type Adapter,
  audienceOf,
  drain,
  isContentBlocks,
  keyArgs,
  markOutput,
  markWrapped,
  mergeSignals,
  refuseWrapped,
  takeRepeat,
  withRepeatNote,
} from '@idempotent-tools/core/adapter-kit';
import type { CallbackManagerForToolRun } from '@langchain/core/callbacks/manager';
import { isDirectToolOutput, ToolMessage } from '@langchain/core/messages';
import type { StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import { withRepeatArgument } from './repeat-schema.js';
import type { CallContext, IdempotencyMetadata, ToolLike } from './types.js';

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

/** Throw unless `tool` is a LangChain tool (`tool()`, `StructuredTool`, `DynamicStructuredTool`). */
export function checkTool(tool: unknown, caller: string): asserts tool is Callable {
  const t = tool as Partial<Callable> | null;
  if (t === null || typeof t !== 'object' || typeof t._call !== 'function') {
    throw new ConfigurationError({
      option: 'tools',
      message: `${caller} takes LangChain tools (made with tool(), or StructuredTool / DynamicStructuredTool instances); got ${t === null ? 'null' : typeof t}.`,
    });
  }
}

/** The ToolMessage content of a value, as `@langchain/core` formats tool outputs. */
function toContent(value: unknown): ToolMessage['content'] {
  if (typeof value === 'string' || isContentBlocks(value)) return value as ToolMessage['content'];
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return String(value);
  }
}

/**
 * The tool, made idempotent: an object of the same class (its prototype is the original), with
 * the same name and schema, the retry note in its description, and a `_call` that runs the
 * original once per turn + arguments. Errors for the developer (no identity, a bad option) are
 * thrown, after `onRefusal` heard of them; errors for the model become an error ToolMessage.
 * The tool and its `_call` are marked: wrapping them again is refused.
 * @throws ConfigurationError when the tool is already idempotent (it came out of a wrapper: its
 *   call would wait for itself), unless it is excluded
 */
export function wrapTool<T extends ToolLike>(
  tool: T,
  adapter: Adapter<CallContext>,
  caller: string,
  onRefusal?: (toolCallId: string, error: unknown) => void,
): T {
  if (adapter.treatment(tool.name) === 'exclude') return tool;
  refuseWrapped(tool.name, tool, caller);
  const original = tool as unknown as Callable;
  const wrapped = markWrapped(Object.create(tool) as Callable);
  Object.defineProperty(wrapped, WRAPPED, { value: true });
  const unsafe = adapter.treatment(tool.name) === 'unsafe';
  const repeats = unsafe ? undefined : adapter.repeats(tool.name);
  const own = (name: string, value: unknown) =>
    Object.defineProperty(wrapped, name, {
      value,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  own(
    'description',
    repeats === undefined
      ? withRetryNote(tool.description, !unsafe)
      : withRepeatNote(tool.description, repeats),
  );
  if (unsafe) return wrapped as unknown as T;
  // The model sees, and LangChain parses the input with, the schema with the repeat argument.
  if (repeats !== undefined) {
    own('schema', withRepeatArgument(original.schema, tool.name, repeats, caller));
  }
  const pair = original.responseFormat === 'content_and_artifact';
  // Our _call returns the finished ToolMessage, which `call` passes on in 'content' format only.
  wrapped.responseFormat = 'content';
  const toolName = tool.name;
  const policy = adapter.policy(toolName) ?? {};
  const reply = (
    toolCallId: string,
    status: 'success' | 'error',
    content: ToolMessage['content'],
    idempotency: IdempotencyMetadata,
    artifact?: unknown,
  ) =>
    new ToolMessage({
      status,
      content,
      artifact,
      tool_call_id: toolCallId,
      name: toolName,
      metadata: { ...original.metadata, idempotency },
    });

  const call: CallFn = async (args, runManager, parentConfig) => {
    const config = (parentConfig ?? {}) as ToolRunnableConfig & { state?: unknown };
    const scratch = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown };
    const state = (config.state ?? scratch?.currentTaskInput) as CallContext['state'];
    const toolCall = config.toolCall;
    const toolCallId = toolCall?.id; // as `call` decides whether to answer with a ToolMessage
    let result: IdempotentResult<unknown>;
    /** What the tool returned when it ran now (a ToolMessage or Command goes out as built). */
    let fresh: unknown;
    // A repeatable tool's repeat argument: part of the key, never of the tool's args.
    const taken = repeats === undefined ? undefined : takeRepeat(args, toolName, repeats);
    if (taken !== undefined && 'error' in taken) {
      if (!toolCallId) throw new Error(taken.error);
      const meta = { key: undefined, replayed: false, outcome: 'error', error: 'invalid_input' };
      return reply(toolCallId, 'error', taken.error, meta as IdempotencyMetadata);
    }
    const toolArgs = taken === undefined ? args : taken.args;
    const keyed =
      taken === undefined || repeats === undefined
        ? args
        : keyArgs(toolArgs, taken.repeat, repeats);
    try {
      const { turnId, scope } = adapter.identify(
        { toolName, args: toolArgs, toolCall, state, config },
        toolName,
      );
      result = await adapter.executor.run(
        { toolName, turnId, scope, args: keyed },
        async (runArgs, exec) => {
          const out = original._call.call(
            tool,
            taken === undefined ? runArgs : toolArgs,
            runManager,
            {
              ...config,
              signal: mergeSignals(config.signal, exec.signal),
              configurable: { ...config.configurable, [KEY_FIELD]: exec.key },
            },
          );
          fresh = await drain(await out, (part) => runManager?.handleToolEvent?.(part), 'return');
          return fresh;
        },
        policy as never,
      );
    } catch (error) {
      const audience = audienceOf(error);
      if (audience === 'developer' && toolCallId) onRefusal?.(toolCallId, error);
      const shown = audience === 'model' ? errorForModel(error) : undefined;
      if (shown === undefined || !toolCallId) throw error;
      const key = (error as { key?: string }).key;
      const meta = { key, replayed: false, outcome: 'error', error: shown.error } as const;
      return reply(toolCallId, 'error', JSON.stringify(shown), meta);
    }

    const { value, replayed, key, outcome } = result;
    // A ToolMessage or Command the tool built itself goes out as it is (the executor hands back
    // its JSON round trip, which is no longer one; see the README's limits).
    const command = (fresh as { lg_name?: unknown } | null)?.lg_name === 'Command';
    if (!replayed && (isDirectToolOutput(fresh) || command)) return fresh;
    if (pair && !(Array.isArray(value) && value.length === 2)) return value;
    const [content, artifact] = pair ? (value as [unknown, unknown]) : [value, undefined];
    const marked = markOutput(content, replayed, adapter.markFresh);
    if (!toolCallId) return marked; // as `call` does without a tool call: the content only
    return reply(toolCallId, 'success', toContent(marked), { key, replayed, outcome }, artifact);
  };
  wrapped._call = markWrapped(call);
  return wrapped as unknown as T;
}
