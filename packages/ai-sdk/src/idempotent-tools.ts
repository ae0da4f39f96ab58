import {
  type Approvals,
  ConfigurationError,
  createApprovals,
  type ExecutionContext,
  type ExecutorOptions,
  markReplayed,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type Adapter,
  type AdapterOptions,
  audienceOf,
  callOf,
  checkToolName,
  createContextRegistry,
  createEscapes,
  createToolSetAdapter,
  drain,
  errorText,
  type PerCall as KitPerCall,
  keyArgs,
  markContent,
  markWrapped,
  mergeSignals,
  type OneToolOptions,
  oneToolOptions,
  type RepeatablePolicy,
  type Repeats,
  readTranscript,
  relay,
  type ToolSetOptions,
  takeRepeat,
  withRepeatNote,
} from '@idempotent-tools/core/adapter-kit';
import type { ModelMessage, Tool, ToolExecutionOptions, ToolSet } from 'ai';
import { checkRequested, requestedIn, runWithApproval } from './approvals.js';
import { withoutRepeat, withRepeatInput } from './repeat-schema.js';

/** A tool's entry of `toolsContext` (after its `contextSchema`, if it has one). */
export type ToolContext = { readonly [key: string]: unknown };

/** One tool call as the AI SDK runs it: what `turnId`, `conversationId` and `scope` functions get. */
export interface ToolCallInfo {
  toolName: string;
  /** The tool input, parsed and validated by the tool's `inputSchema`. */
  input: unknown;
  /** The AI SDK's options: `messages`, `context` (this tool's `toolsContext` entry), `toolCallId`. */
  options: ToolExecutionOptions<ToolContext | undefined>;
}

/** A per-call value: fixed (wrap per request), or computed from the call (undefined: not known). */
export type PerCall = KitPerCall<ToolCallInfo>;

/**
 * How a call is identified: `conversationId` (useChat's chat id, the `id` of the request body;
 * or a function of the call, e.g. `({ options }) => options.context?.chatId as string | undefined`
 * with `toolsContext`), or `turnId`; `scope` (tenant / user); `markFresh`.
 */
export type WrapOptions = Pick<
  AdapterOptions<ToolCallInfo>,
  'turnId' | 'conversationId' | 'scope' | 'markFresh'
>;

/** The policy type of a tool: its input and (final) output types. */
export type PolicyOf<T> = T extends {
  execute?: ((input: infer I, options: never) => infer R) | undefined;
}
  ? ToolPolicy<I, R extends AsyncIterable<infer O> ? O : Awaited<R>>
  : ToolPolicy;

/**
 * Options of `idempotentTools(tools, options)`. A policy may say `repeatable` (deliberate
 * repeats: the tool's `inputSchema` gets the `repeat` argument, see the README).
 */
export type IdempotentToolsOptions<TOOLS extends ToolSet> = ExecutorOptions &
  WrapOptions &
  ToolSetOptions<
    keyof TOOLS & string,
    { [K in keyof TOOLS]?: PolicyOf<TOOLS[K]> & RepeatablePolicy }
  >;

/** Options of `idempotentTool(name, tool, options)`. */
export type IdempotentToolOptions<TOOL extends Tool> = ExecutorOptions &
  WrapOptions &
  OneToolOptions<PolicyOf<TOOL> & RepeatablePolicy>;

type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;
type Execute = NonNullable<Tool['execute']>;
type Options = ToolExecutionOptions<ToolContext | undefined>;

/** Marked outputs of this process -> the original output (for `toModelOutput`). */
const marks = new WeakMap<object, { value: unknown; replayed: boolean }>();
const contexts = createContextRegistry();

/**
 * The idempotency context of a wrapped call, from the options your `execute` received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(options: object): ExecutionContext | undefined {
  return contexts.get(options);
}

/** Developer errors (nothing ran) out of generateText / streamText (see `createEscapes`). */
const escapes = createEscapes();

/** The error of a call: one for the developer escapes; one for the model is thrown. */
function failure(error: unknown) {
  if (audienceOf(error) === 'developer') return escapes.escape(error);
  const text = errorText(error); // the AI SDK shows the model `error.toString()`
  if (text !== undefined && typeof error === 'object' && error !== null) {
    Object.defineProperty(error, 'toString', { value: () => text, configurable: true });
  }
  throw error;
}

/** The model messages of the conversation, as the turn derivation reads them. */
const transcriptOf = (messages: readonly ModelMessage[] | undefined) =>
  readTranscript(messages, {
    from: ({ role }) => (role === 'system' ? 'prompt' : role === 'assistant' ? 'model' : role),
    content: (message) => message.content,
  });

/** The model output of `toModelOutput`, marked like a plain output would be. */
function markModelOutput(output: ToolResultOutput, replayed: boolean): ToolResultOutput {
  if (output.type === 'text' || output.type === 'json') {
    const value = markReplayed(output.value, replayed, { markFresh: true }) as never;
    return { ...output, type: 'json', value };
  }
  if (output.type === 'content')
    return { ...output, value: markContent(output.value, replayed) as typeof output.value };
  return output;
}

/** The AI SDK's own model output of a tool without `toModelOutput`. */
function defaultModelOutput(output: unknown): ToolResultOutput {
  if (typeof output === 'string') return { type: 'text', value: output };
  return { type: 'json', value: JSON.parse(JSON.stringify(output) ?? 'null') };
}

function retryNote(tool: Tool, safe: boolean, repeats?: Repeats): Partial<Tool> {
  if (tool.type === 'provider') return {}; // provider tools have no description of their own
  const description = tool.description;
  const note = (text: string | undefined) =>
    repeats === undefined ? withRetryNote(text, safe) : withRepeatNote(text, repeats);
  return {
    description:
      typeof description === 'function'
        ? (options) => note(description(options))
        : note(description),
  } as Partial<Tool>;
}

/** The model's error for its input (a bad repeat argument): the AI SDK shows it `toString()`. */
function modelError(text: string): Error {
  const error = new Error(text);
  Object.defineProperty(error, 'toString', { value: () => text, configurable: true });
  return error;
}

/** How a tool takes a deliberate repeat: none for a provider tool, whose schema is the provider's. */
function repeatsOf(name: string, tool: Tool, adapter: Adapter<ToolCallInfo>, caller: string) {
  const repeats = adapter.repeats(name);
  if (repeats === undefined || tool.type !== 'provider') return repeats;
  throw new ConfigurationError({
    option: `policies.${name}.repeatable`,
    message: `${caller}: ${name} is a provider tool, whose input schema is the provider's; it cannot take the repeat argument. Leave out repeatable.`,
  });
}

type NeedsApproval = Exclude<Tool['needsApproval'], boolean | undefined>;

/**
 * The tool's `needsApproval`, binding each request to the exact call: when the model emits a
 * call and the tool asks, the request is stored with the args pinned to the tool call id; a call
 * already decided on the store is not asked again (approved: it runs, or replays; rejected: the
 * rejection is replayed). A call the messages already asked about is the SDK checking an approved
 * call of the history before it runs it: nothing is stored, and one whose request is not on the
 * store (the model never asked about it) is refused, out of generateText / streamText.
 */
function boundNeedsApproval(
  own: Tool['needsApproval'],
  approvals: Approvals,
  identify: (input: unknown, options: Options) => ReturnType<typeof callOf>,
  policy: ToolPolicy | undefined,
): NeedsApproval {
  return async (input, options) => {
    const asks =
      typeof own === 'function' ? await (own as NeedsApproval)(input, options) : own === true;
    if (!asks) return false;
    try {
      const call = identify(input, options as unknown as Options);
      const { toolCallId, messages } = options;
      if (requestedIn(messages, toolCallId)) {
        await checkRequested(approvals, call, { toolCallId, messages }, policy);
        return true;
      }
      const approval = await approvals.requestApproval(call, {
        policy,
        ref: options.toolCallId,
      });
      return approval.status === 'pending';
    } catch (error) {
      if (audienceOf(error) === 'developer') throw error;
      return true; // the model's error (other args under this id...): execute answers it
    }
  };
}

function wrapTool(
  name: string,
  tool: Tool,
  adapter: Adapter<ToolCallInfo>,
  approvals: Approvals,
  caller: string,
): Tool {
  const execute = tool.execute as Execute | undefined;
  if (execute === undefined) return tool; // provider-executed, or run by the client
  const treatment = adapter.treatment(name);
  if (treatment === 'exclude') return tool;
  if (treatment === 'unsafe') return { ...tool, ...retryNote(tool, false) } as Tool;
  const policy = adapter.policy(name) as ToolPolicy | undefined;
  const { executor, markFresh } = adapter;
  const repeats = repeatsOf(name, tool, adapter, caller);

  /** The tool's own args of the model's input, and the key's (with a repeat of 2 or more). */
  const split = (input: unknown) => {
    if (repeats === undefined) return { args: input, key: input };
    const taken = takeRepeat(input, name, repeats);
    if ('error' in taken) throw modelError(taken.error); // nothing ran
    return { args: taken.args, key: keyArgs(taken.args, taken.repeat, repeats) };
  };
  const identify = (input: unknown, options: Options) => {
    const { args, key } = split(input);
    return callOf(adapter, { toolName: name, input: args, options }, name, key, policy);
  };
  const asks = tool.needsApproval !== undefined && tool.needsApproval !== false;
  const run = (input: unknown, options: Options, emit?: (part: unknown) => void) => {
    const call = identify(input, options);
    const args = withoutRepeat(input, repeats); // the tool never sees the repeat argument
    const fn = async (given: unknown, ctx: ExecutionContext) => {
      const inner = { ...options, abortSignal: mergeSignals(options.abortSignal, ctx.signal) };
      contexts.set(inner, ctx);
      // A streaming tool's final output is stored.
      return drain(execute(repeats === undefined ? given : args, inner), emit);
    };
    return runWithApproval(
      approvals,
      call,
      { asks, toolCallId: options.toolCallId, messages: options.messages, policy },
      () => approvals.run(call, fn, policy),
      () => executor.run(call, fn, policy),
    );
  };
  const mark = (value: unknown, replayed: boolean): unknown => {
    const marked = markReplayed(value, replayed, { markFresh });
    if (marked !== value && typeof marked === 'object' && marked !== null) {
      marks.set(marked, { value, replayed });
    }
    return marked;
  };

  const wrapped =
    Object.prototype.toString.call(execute) === '[object AsyncGeneratorFunction]'
      ? async function* streaming(input: unknown, options: Options) {
          let result: Awaited<ReturnType<typeof run>>;
          try {
            result = yield* relay((emit) => run(input, options, emit));
          } catch (error) {
            yield failure(error);
            return;
          }
          // A fresh run already yielded its final output; a replay yields the stored one.
          if (result.replayed || markFresh) yield mark(result.value, result.replayed);
        }
      : async (input: unknown, options: Options) => {
          try {
            const result = await run(input, options);
            return mark(result.value, result.replayed);
          } catch (error) {
            return failure(error);
          }
        };

  const own = tool.toModelOutput;
  const onInputAvailable = tool.onInputAvailable;
  const needsApproval =
    repeats === undefined || typeof tool.needsApproval !== 'function'
      ? tool.needsApproval
      : (((input, options) =>
          (tool.needsApproval as NeedsApproval)(
            withoutRepeat(input, repeats),
            options,
          )) as NeedsApproval);
  return {
    ...tool,
    ...retryNote(tool, true, repeats),
    ...(repeats === undefined ? {} : { inputSchema: withRepeatInput(tool, name, repeats, caller) }),
    // Marked: wrapping this tool again is refused at wrap time (its call would wait for itself).
    execute: markWrapped(wrapped) as Execute,
    ...(asks
      ? { needsApproval: boundNeedsApproval(needsApproval, approvals, identify, policy) }
      : {}),
    // Before anything runs, out of generateText / streamText (the AI SDK does not catch here).
    onInputAvailable: async (options: Options & { input: unknown }) => {
      try {
        identify(options.input, options);
      } catch (error) {
        if (audienceOf(error) === 'developer') throw error;
      }
      await onInputAvailable?.({
        ...options,
        input: withoutRepeat(options.input, repeats),
      } as never);
    },
    toModelOutput: async (part: Parameters<NonNullable<Tool['toModelOutput']>>[0]) => {
      const { output } = part;
      escapes.rethrow(output);
      const marked = typeof output === 'object' && output !== null ? marks.get(output) : undefined;
      if (own === undefined) return defaultModelOutput(output);
      const input = withoutRepeat(part.input, repeats);
      if (marked === undefined) return own({ ...part, input });
      return markModelOutput(await own({ ...part, input, output: marked.value }), marked.replayed);
    },
  } as Tool;
}

function wrapSet(tools: unknown, options: unknown, caller: string): Record<string, Tool> {
  const { adapter, entries } = createToolSetAdapter<ToolCallInfo, Tool>(tools, options, {
    caller,
    set: 'the tool set you pass to generateText: { name: tool({...}) }',
    tool: 'a tool object: define it with tool({ ... })',
    transcript: (call) => transcriptOf(call.options.messages),
    repeatable: true,
    howTo:
      "conversationId (your chat id: useChat's `id` of the request body, or ({ options }) => options.context?.chatId) or turnId (the id of the user message)",
  });
  const approvals = createApprovals(adapter.executor);
  return Object.fromEntries(
    entries.map(([name, tool]) => [name, wrapTool(name, tool, adapter, approvals, caller)]),
  );
}

/**
 * Make a tool set idempotent: each tool's `execute` becomes a lookup first, so a repeat of the
 * same call in the same turn of the same conversation replays the stored output (marked
 * `replayed: true`) instead of running the side effect again. Every other field is kept; tools
 * without `execute` (provider-executed) are returned untouched.
 *
 * ```ts
 * // In the route handler of useChat: wrap per request, with the chat id.
 * const { id, messages } = await req.json();
 * const tools = idempotentTools({ chargeCard, sendEmail }, { store, conversationId: id });
 * ```
 *
 * @throws ConfigurationError at once for a setup that can never tell conversations apart (no
 *   `conversationId` / `turnId`), a misspelt option, a bad policy, a tool name providers reject
 */
export function idempotentTools<TOOLS extends ToolSet>(
  tools: TOOLS,
  options: IdempotentToolsOptions<TOOLS>,
): TOOLS {
  return wrapSet(tools, options, 'idempotentTools') as TOOLS;
}

/** Make one tool idempotent (see `idempotentTools`); `name` is the tool's name in the tool set. */
export function idempotentTool<TOOL extends Tool>(
  name: string,
  tool: TOOL,
  options: IdempotentToolOptions<TOOL>,
): TOOL {
  checkToolName(name, 'idempotentTool');
  return wrapSet({ [name]: tool }, oneToolOptions(name, options), 'idempotentTool')[name] as TOOL;
}
