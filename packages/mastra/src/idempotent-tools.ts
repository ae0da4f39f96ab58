import {
  type Approvals,
  createApprovals,
  type ExecutionContext,
  type ExecutorOptions,
  InvalidInputError,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type Adapter,
  type AdapterOptions,
  audienceOf,
  callOf,
  checkToolName,
  createEscapes,
  createToolSetAdapter,
  errorText,
  type PerCall as KitPerCall,
  keyArgs,
  markWrapped,
  mergeSignals,
  NotAnOutcome,
  type OneToolOptions,
  oneToolOptions,
  type RepeatablePolicy,
  runCall,
  type ToolSetOptions,
  takeRepeat,
  withRepeatNote,
} from '@idempotent-tools/core/adapter-kit';
import { type Tool, validateToolInput } from '@mastra/core/tools';
import {
  checkEmitted,
  passedApproval,
  pinApproval,
  recordEmitted,
  TOOL_APPROVAL,
  type ToolApproval,
} from './approvals.js';
import { gateWithoutRepeat, repeatableFields } from './repeat-schema.js';
import { savesEarly, transcriptOf } from './transcript.js';

/** A Mastra tool, as `createTool` makes it (or any `ToolAction`). */
// biome-ignore lint/suspicious/noExplicitAny: a tool of any input, output and context types
export type AnyTool = Tool<any, any, any, any, any, any, any>;
type Context = Record<string, unknown> & {
  abortSignal?: AbortSignal;
  agent?: {
    threadId?: string;
    resourceId?: string;
    messages?: unknown[];
    resumeData?: unknown;
    toolCallId?: string;
  };
  memory?: { recall(args: object): Promise<{ messages: unknown[] }> };
  resumeData?: unknown;
};

/** One tool call as Mastra runs it: what `turnId`, `conversationId` and `scope` functions get. */
export interface ToolCallInfo {
  toolName: string;
  /** The tool input, validated by the tool's `inputSchema` (without the repeat argument). */
  input: unknown;
  /**
   * The execution context Mastra handed the tool: `requestContext`, `agent` (`threadId`,
   * `resourceId`, `messages`, `toolCallId`), `runId`, `workflow`.
   */
  context: Context;
  /** The memory thread's stored messages (empty without memory), read before the call. */
  history: readonly unknown[];
}

/** A per-call value: fixed (wrap per request), or computed from the call (undefined: not known). */
export type PerCall = KitPerCall<ToolCallInfo>;

/** The policy type of a tool: its input and output types. */
export type PolicyOf<T> = T extends {
  execute?: ((input: infer I, c: never) => infer R) | undefined;
}
  ? ToolPolicy<I, Awaited<R>>
  : ToolPolicy;

type WrapOptions = ExecutorOptions &
  Pick<AdapterOptions<ToolCallInfo>, 'turnId' | 'conversationId' | 'scope' | 'markFresh'>;

/**
 * Options of `idempotentTools(tools, options)`. A policy may say `repeatable` (deliberate
 * repeats: the tool's `inputSchema` gets the `repeat` argument, see the README).
 */
export type IdempotentToolsOptions<TOOLS extends Record<string, AnyTool>> = WrapOptions &
  ToolSetOptions<
    keyof TOOLS & string,
    { [K in keyof TOOLS]?: PolicyOf<TOOLS[K]> & RepeatablePolicy }
  >;

/** Options of `idempotentTool(tool, options)`. */
export type IdempotentToolOptions<TOOL extends AnyTool> = WrapOptions &
  OneToolOptions<PolicyOf<TOOL> & RepeatablePolicy>;

const CONTEXT = Symbol.for('idempotent-tools.mastra.context');
/** Developer errors of calls (nothing ran): the wrapped `toModelOutput` throws them. */
const escapes = createEscapes();

/**
 * The idempotency context of a wrapped call, from the context your `execute` received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(context: object): ExecutionContext | undefined {
  return (context as { [CONTEXT]?: ExecutionContext })[CONTEXT];
}

/** The stored messages of the call's memory thread (the agent's input holds only the new ones). */
async function historyOf(context: Context): Promise<unknown[]> {
  const threadId = context.agent?.threadId;
  if (context.memory === undefined || threadId === undefined) return [];
  const { resourceId } = context.agent ?? {};
  return (await context.memory.recall({ threadId, resourceId, perPage: false })).messages;
}

/** Input a wrapped call refuses (nothing runs): what the model reads. */
type Refused = { refused: unknown; invalid: true };
/** A call as the executor keys it. */
type KeyedCall = {
  toolName: string;
  turnId: string | undefined;
  scope: string | undefined;
  args: unknown;
};

function wrapTool(
  name: string,
  tool: AnyTool,
  adapter: Adapter<ToolCallInfo>,
  approvals: Approvals,
  caller: string,
): AnyTool {
  const execute = tool.execute;
  const treatment = adapter.treatment(name);
  if (execute === undefined || treatment === 'exclude') return tool;
  const copy = (fields: Record<string, unknown>): AnyTool =>
    Object.assign(Object.create(Object.getPrototypeOf(tool)), tool, fields);
  if (treatment === 'unsafe') return copy({ description: withRetryNote(tool.description, false) });
  const policy = adapter.policy(name) as ToolPolicy | undefined;
  const own = tool.toModelOutput;
  const repeats = adapter.repeats(name);
  // The tool's own gates never see the repeat argument (Mastra hands them the model's input).
  const requireApproval = gateWithoutRepeat(tool.requireApproval, repeats);
  /** The tool's own approval gate: its calls are recorded when the model emits them. */
  const gated =
    Boolean(tool.requireApproval) ||
    typeof (tool as { needsApprovalFn?: unknown }).needsApprovalFn === 'function';

  /** The tool's args and the key's (with a repeat of 2 or more), or why the input is refused. */
  const argsOf = (input: unknown, context: Context): Refused | { args: unknown; key: unknown } => {
    let args = input;
    let repeat = 1;
    if (repeats !== undefined) {
      const taken = takeRepeat(input, name, repeats);
      if ('error' in taken) return { refused: taken.error, invalid: true };
      ({ args, repeat } = taken);
    }
    if ((context?.agent?.resumeData ?? context?.resumeData) == null) {
      const checked = validateToolInput(tool.inputSchema as never, args, name);
      if (checked.error) return { refused: checked.error, invalid: true };
      args = checked.data;
    }
    const key = repeats === undefined ? args : keyArgs(args, repeat, repeats);
    return { args, key };
  };

  /**
   * The call as the executor keys it (`key`: the tool's args, with a repeat of 2 or more) and the
   * tool's args, or what to return when it cannot run (nothing ran).
   */
  const identify = async (
    input: unknown,
    context: Context,
  ): Promise<
    Refused | { refused: unknown; error: unknown } | { call: KeyedCall; args: unknown }
  > => {
    const checked = argsOf(input, context);
    if ('refused' in checked) return checked;
    const { args, key } = checked;
    try {
      const info = {
        toolName: name,
        input: args,
        context,
        history: await historyOf(context ?? {}),
      };
      const { turnId, scope } = callOf(adapter, info, name, key, policy);
      return { call: { toolName: name, turnId, scope, args: key }, args };
    } catch (error) {
      return { refused: escapes.escape(error), error };
    }
  };

  /**
   * An approved call: refused unless the model emitted it with these args (the tool's own gate
   * records them; the run's `requireToolApproval` alone records nothing), then pinned. The
   * model's text when it must not run, undefined when it may.
   */
  const emittedThenPinned = async (call: KeyedCall, toolCallId: string) => {
    if (gated) {
      try {
        await checkEmitted(adapter.executor, name, toolCallId, call.args);
      } catch (error) {
        if (audienceOf(error) !== 'model') throw error;
        return errorText(error);
      }
    }
    return pinApproval(approvals, call, policy, toolCallId);
  };

  const wrapped = async (input: unknown, context: Context) => {
    const identified = await identify(input, context);
    if ('refused' in identified) return identified.refused; // nothing ran
    const { call, args } = identified;
    const resuming = (context?.agent?.resumeData ?? context?.resumeData) != null;
    // The gate as Mastra asked it: the tool's without the repeat argument, the run's with it.
    const asked = repeats === undefined ? args : { ...(input as object), ...(args as object) };
    if (!resuming && (await passedApproval(requireApproval, name, asked, context))) {
      // Approved by Mastra's gate (which gives the gate no call id): only a call the model
      // emitted, with its arguments; pin the approval to it here (the approval is of the key's
      // args: `repeat: 2` is approved on its own).
      const toolCallId = context.agent?.toolCallId ?? '';
      const refused = await emittedThenPinned(call, toolCallId).catch((error: unknown) => ({
        developer: error,
      }));
      if (typeof refused === 'string') return refused; // nothing ran: the model reads why
      if (refused !== undefined) return escapes.escape(refused.developer);
    }
    const result = await runCall(adapter as Adapter<never>, call, async (a, ctx) => {
      let suspended = false;
      const flag = (on: Record<string, unknown> | undefined) => {
        const fn = on?.suspend as ((...s: unknown[]) => unknown) | undefined;
        if (typeof fn !== 'function') return on;
        const suspend = (...s: unknown[]) => {
          suspended = true;
          return fn(...s);
        };
        return { ...on, suspend };
      };
      const inner = {
        ...flag(context),
        agent: flag(context?.agent),
        [CONTEXT]: ctx,
        abortSignal: mergeSignals(context?.abortSignal, ctx.signal),
      };
      // The tool never sees the repeat argument (the key's args have it from repeat 2 on).
      const value = await execute(repeats === undefined ? a : args, inner as never);
      // A suspended call (it waits for resumeData) is not the call's outcome: never replayed.
      if (suspended) throw new NotAnOutcome(value);
      return value;
    });
    if ('output' in result) return result.output;
    if (result.developer) return escapes.escape(result.error);
    throw result.error; // the tool's own error: Mastra shows it to the model
  };

  const approval: ToolApproval = {
    approvals,
    async request(input, context, ref) {
      const identified = await identify(input, context as Context);
      if ('error' in identified) throw identified.error;
      if ('refused' in identified) {
        throw new InvalidInputError({
          field: 'args',
          message: `The suspended call of ${name} has arguments its inputSchema refuses: Mastra will not run it. Nothing was decided.`,
        });
      }
      if (gated) await checkEmitted(adapter.executor, name, ref, identified.call.args);
      return approvals.requestApproval(identified.call, { policy, ref });
    },
  };
  const fields = repeats === undefined ? {} : repeatableFields(tool, name, repeats, caller);
  const announce = (fields.onInputAvailable ?? tool.onInputAvailable) as
    | ((options: never) => unknown)
    | undefined;
  /** Calls the model is streaming (Mastra's `onInputStart`), until they are announced. */
  const streaming = new Set<string>();
  const ownStart = tool.onInputStart as ((options: never) => unknown) | undefined;
  const onInputStart = async (options: { toolCallId?: unknown }) => {
    if (typeof options.toolCallId === 'string') {
      streaming.add(options.toolCallId);
      if (streaming.size > 10_000) streaming.delete(streaming.values().next().value as string);
    }
    await ownStart?.(options as never);
  };
  /**
   * The model emitted a call (Mastra announces it before its approval gate): recorded, then the
   * tool's own callback. Mastra also announces the suspended call again when the run resumes,
   * from the run snapshot: that one is not the model's (the snapshot may be edited) and is not
   * recorded. A call is the model's when Mastra saw the model stream it (`onInputStart`), or
   * when it is announced in a run's first pass (Mastra hands the run's input messages; a resumed
   * run has none).
   */
  const onInputAvailable = async (options: {
    toolCallId?: unknown;
    input?: unknown;
    messages?: unknown;
  }) => {
    const id = options.toolCallId;
    const streamed = typeof id === 'string' && streaming.delete(id);
    const firstPass = Array.isArray(options.messages) && options.messages.length > 0;
    const checked = argsOf(options.input, {});
    if (typeof id === 'string' && (streamed || firstPass) && !('refused' in checked)) {
      await recordEmitted(adapter.executor, name, id, checked.key);
    }
    await announce?.(options as never);
  };
  return copy({
    [TOOL_APPROVAL]: approval,
    description:
      repeats === undefined
        ? withRetryNote(tool.description, true)
        : withRepeatNote(tool.description, repeats),
    execute: markWrapped(wrapped),
    ...fields,
    ...(gated ? { onInputStart, onInputAvailable } : {}),
    toModelOutput: async (output: unknown) => {
      escapes.rethrow(output);
      return own === undefined ? undefined : own(output);
    },
  });
}

function wrapSet(tools: unknown, options: unknown, caller: string): Record<string, AnyTool> {
  const { adapter, entries } = createToolSetAdapter<ToolCallInfo, AnyTool>(tools, options, {
    caller,
    set: 'the tools record of your Agent: { name: createTool({...}) }',
    tool: 'a Mastra tool: define it with createTool({ ... })',
    isTool: (tool) => typeof (tool as { id?: unknown }).id === 'string',
    conversation: ({ context }) => {
      const { threadId, resourceId } = context?.agent ?? {};
      if (threadId === undefined || threadId === '') return undefined;
      return resourceId === undefined ? threadId : JSON.stringify([resourceId, threadId]);
    },
    transcript: ({ context, history }) =>
      transcriptOf([...history, ...(context?.agent?.messages ?? [])], savesEarly(context ?? {})),
    repeatable: true,
    howTo:
      "a memory thread (agent.generate(prompt, { memory: { thread, resource } })), conversationId (your chat id, e.g. ({ context }) => context.requestContext.get('chatId')) or turnId (the id of the user message)",
  });
  const approvals = createApprovals(adapter.executor);
  return Object.fromEntries(
    entries.map(([name, tool]) => [name, wrapTool(name, tool, adapter, approvals, caller)]),
  );
}

/**
 * Make a Mastra tools record idempotent: each tool's `execute` becomes a lookup first, so a
 * repeat of the same call in the same turn of the same conversation (memory thread) replays the
 * stored output (marked `replayed: true`) instead of running the side effect again. Every other
 * field (`requireApproval`, schemas, `toModelOutput`...) is kept.
 *
 * @throws ConfigurationError at once for a misspelt option, a bad policy, a tool name providers
 *   reject; out of `agent.generate` / `agent.stream` for a call of a run without a memory
 *   thread when neither `conversationId` nor `turnId` is given (nothing runs)
 */
export function idempotentTools<TOOLS extends Record<string, AnyTool>>(
  tools: TOOLS,
  options: IdempotentToolsOptions<TOOLS>,
): TOOLS {
  return wrapSet(tools, options, 'idempotentTools') as TOOLS;
}

/** Make one tool idempotent (see `idempotentTools`); its name is its `id`. */
export function idempotentTool<TOOL extends AnyTool>(
  tool: TOOL,
  options: IdempotentToolOptions<TOOL>,
): TOOL {
  const name = (tool as { id?: unknown } | null)?.id;
  checkToolName(name, 'idempotentTool');
  return wrapSet({ [name]: tool }, oneToolOptions(name, options), 'idempotentTool')[name] as TOOL;
}
