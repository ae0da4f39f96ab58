import {
  type Approvals,
  ConfigurationError,
  createApprovals,
  type ExecutionContext,
  markReplayed,
  type ToolPolicy,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import {
  asSchema,
  type FlexibleSchema,
  type JSONSchema7,
  jsonSchema,
  type Tool,
  type ToolExecutionOptions,
  type ToolSet,
} from 'ai';
import { askApproval, runWithApproval } from './approvals.js';

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
export type PerCall = kit.PerCall<ToolCallInfo>;

/**
 * How a call is identified: `conversationId` (useChat's chat id, or e.g. `({ options }) =>
 * options.context?.chatId` with `toolsContext`) or `turnId`; `scope` (tenant / user); `markFresh`.
 */
export type WrapOptions = kit.ToolWrapOptions<ToolCallInfo>;

/** The policy type of a tool: its input and (final) output types. */
export type PolicyOf<T> = T extends {
  execute?: ((input: infer I, options: never) => infer R) | undefined;
}
  ? ToolPolicy<I, R extends AsyncIterable<infer O> ? O : Awaited<R>>
  : ToolPolicy;

/** Options of `idempotentTools(tools, options)`; a policy may say `repeatable` (see the README). */
export type IdempotentToolsOptions<TOOLS extends ToolSet> = kit.ToolSetWrapperOptions<
  ToolCallInfo,
  keyof TOOLS & string,
  { [K in keyof TOOLS]: PolicyOf<TOOLS[K]> }
>;

/** Options of `idempotentTool(name, tool, options)`. */
export type IdempotentToolOptions<TOOL extends Tool> = kit.OneToolWrapperOptions<
  ToolCallInfo,
  PolicyOf<TOOL>
>;

type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;
type Execute = NonNullable<Tool['execute']>;
type Options = ToolExecutionOptions<ToolContext | undefined>;
type NeedsApproval = Exclude<Tool['needsApproval'], boolean | undefined>;

/** Marked outputs of this process -> the original output (for `toModelOutput`). */
const marks = new WeakMap<object, { value: unknown; replayed: boolean }>();
const contexts = kit.createContextRegistry();

/**
 * The idempotency context of a wrapped call, from the options your `execute` received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(options: object): ExecutionContext | undefined {
  return contexts.get(options);
}

/** Developer errors (nothing ran) out of generateText / streamText (see `createEscapes`). */
const escapes = kit.createEscapes();

/**
 * A call's outcome as `execute` answers it: the output; a developer error escapes; the model's
 * error is thrown (the core error itself when there is one) with its text as the `toString()`
 * the AI SDK shows the model; the tool's own error is thrown as it is.
 */
function answer(outcome: kit.SettledRun | { text: string }): unknown {
  if ('output' in outcome) return outcome.output;
  if ('developer' in outcome) return escapes.escape(outcome.developer);
  if ('error' in outcome) throw outcome.error;
  const { text } = outcome;
  const cause = 'cause' in outcome ? outcome.cause : undefined;
  const error = typeof cause === 'object' && cause !== null ? cause : new Error(text);
  throw Object.defineProperty(error, 'toString', { value: () => text, configurable: true });
}

/** The model output of `toModelOutput`, marked like a plain output would be. */
function markModelOutput(output: ToolResultOutput, replayed: boolean): ToolResultOutput {
  if (output.type === 'text' || output.type === 'json') {
    const value = markReplayed(output.value, replayed, { markFresh: true }) as never;
    return { ...output, type: 'json', value };
  }
  if (output.type === 'content')
    return { ...output, value: kit.markContent(output.value, replayed) as typeof output.value };
  return output;
}

/** The AI SDK's own model output of a tool without `toModelOutput`. */
function defaultModelOutput(output: unknown): ToolResultOutput {
  if (typeof output === 'string') return { type: 'text', value: output };
  return { type: 'json', value: JSON.parse(JSON.stringify(output) ?? 'null') };
}

/** The tool's description with its note (a description function is wrapped); a provider tool has none. */
function described(tool: Tool, shown: kit.ToolPresentation): Partial<Tool> {
  if (tool.type === 'provider') return {};
  const own = tool.description;
  const description =
    typeof own === 'function' ? (o: never) => shown.describe(own(o)) : shown.describe(own);
  return { description } as Partial<Tool>;
}

/**
 * A repeatable tool's `inputSchema`: its JSON schema with the repeat argument; its own validation
 * of the input without it (a strict zod object would refuse it), the argument put back as given.
 * @throws ConfigurationError when the tool's schema has that property already, or is no object's
 */
function repeatInput(tool: Tool, shown: kit.ToolPresentation, argument: string): FlexibleSchema {
  const own = asSchema(tool.inputSchema as FlexibleSchema | undefined);
  const extend = (json: JSONSchema7) =>
    shown.jsonSchema(json, (tool as { strict?: boolean }).strict === true);
  const json = own.jsonSchema; // extended now when it is at hand: a clash fails at wrap time
  const extended =
    typeof (json as PromiseLike<JSONSchema7>).then === 'function'
      ? Promise.resolve(json).then(extend)
      : extend(json as JSONSchema7);
  return jsonSchema(extended, {
    async validate(value) {
      const rest = shown.strip(value);
      const result = (await own.validate?.(rest)) ?? { success: true as const, value: rest };
      if (rest === value || !result.success || typeof result.value !== 'object') return result;
      const repeat = (value as Record<string, unknown>)[argument];
      return { success: true, value: { ...result.value, [argument]: repeat } };
    },
  });
}

function wrapTool(
  name: string,
  tool: Tool,
  adapter: kit.Adapter<ToolCallInfo>,
  approvals: Approvals,
  caller: string,
): Tool {
  const execute = tool.execute as Execute | undefined;
  if (execute === undefined) return tool; // provider-executed, or run by the client
  const shown = kit.presentTool(adapter, name, caller);
  if (shown.treatment === 'exclude') return tool;
  if (shown.treatment === 'unsafe') return { ...tool, ...described(tool, shown) } as Tool;
  const { repeats, strip } = shown;
  if (repeats !== undefined && tool.type === 'provider') {
    throw new ConfigurationError({
      option: `policies.${name}.repeatable`,
      message: `${caller}: ${name} is a provider tool, whose input schema is the provider's; it cannot take the repeat argument. Leave out repeatable.`,
    });
  }
  const { needsApproval: gate, onInputAvailable, toModelOutput: own } = tool;
  const asks = gate !== undefined && gate !== false;

  /** The pipeline's first phase (the input is parsed and validated by its inputSchema already). */
  const prepare = (input: unknown, options: Options) =>
    kit.prepareCall(adapter, {
      toolName: name,
      input,
      parsed: true,
      info: (args) => ({ toolName: name, input: args, options }),
    });
  /** The prepared call for a hook before execute: a developer error is thrown out of the SDK. */
  const check = async (input: unknown, options: Options) => {
    const prepared = await prepare(input, options);
    if ('developer' in prepared) throw prepared.developer;
    return 'prepared' in prepared ? prepared.prepared : undefined; // else execute tells the model
  };
  const mark = (value: unknown, replayed: boolean): unknown => {
    const marked = markReplayed(value, replayed, { markFresh: adapter.markFresh });
    if (marked !== value) marks.set(marked as object, { value, replayed }); // a marked copy
    return marked;
  };
  const run = async (input: unknown, options: Options, emit?: (part: unknown) => void) => {
    const prepared = await prepare(input, options);
    if (!('prepared' in prepared)) return prepared;
    const fn = async (_key: unknown, ctx: ExecutionContext) => {
      const inner = { ...options, abortSignal: kit.mergeSignals(options.abortSignal, ctx.signal) };
      contexts.set(inner, ctx);
      return kit.drain(execute(prepared.prepared.args, inner), emit); // a stream's last part is stored
    };
    const guarded = () =>
      runWithApproval(approvals, adapter.executor, prepared.prepared, fn, { ...options, asks });
    return kit.settleRun(adapter, guarded, mark);
  };
  const wrapped =
    Object.prototype.toString.call(execute) === '[object AsyncGeneratorFunction]'
      ? async function* streaming(input: unknown, options: Options) {
          const outcome = yield* kit.relay((emit) => run(input, options, emit));
          // A fresh run yielded its final output already; a replay (a marked copy) yields it.
          const { markFresh } = adapter;
          const fresh = 'output' in outcome && !markFresh && !marks.has(outcome.output as object);
          if (!fresh) yield answer(outcome);
        }
      : async (input: unknown, options: Options) => answer(await run(input, options));
  const needsApproval: NeedsApproval = async (input, options) => {
    const given =
      typeof gate === 'function' ? await (gate as NeedsApproval)(strip(input), options) : asks;
    const prepared = given ? await check(input, options as unknown as Options) : undefined;
    if (prepared === undefined) return given; // asked: the model's error, execute answers it
    return askApproval(approvals, prepared, options).catch((error: unknown) => {
      if (kit.audienceOf(error) === 'developer') throw error;
      return true; // the model's error (other args under this id...): execute answers it
    });
  };
  return {
    ...tool,
    ...described(tool, shown),
    ...(repeats === undefined ? {} : { inputSchema: repeatInput(tool, shown, repeats.argument) }),
    // Marked: wrapping this tool again is refused at wrap time (its call would wait for itself).
    execute: kit.markWrapped(wrapped) as Execute,
    ...(asks ? { needsApproval } : {}),
    // Before anything runs, out of generateText / streamText (the AI SDK does not catch here).
    onInputAvailable: async (options: Options & { input: unknown }) => {
      await check(options.input, options);
      await onInputAvailable?.({ ...options, input: strip(options.input) } as never);
    },
    toModelOutput: async (part: Parameters<NonNullable<Tool['toModelOutput']>>[0]) => {
      const { output } = part;
      escapes.rethrow(output);
      if (own === undefined) return defaultModelOutput(output);
      const marked = marks.get(output as object); // undefined for a value that is no object
      const input = strip(part.input);
      if (marked === undefined) return own({ ...part, input });
      return markModelOutput(await own({ ...part, input, output: marked.value }), marked.replayed);
    },
  } as Tool;
}

/** How the adapter of a tool set describes itself (the kit's `ToolSetSpec`). */
const SET: Omit<kit.ToolSetSpec<ToolCallInfo>, 'caller'> = {
  set: 'the tool set you pass to generateText: { name: tool({...}) }',
  tool: 'a tool object: define it with tool({ ... })',
  transcript: ({ options }) =>
    kit.readTranscript(options.messages, {
      from: ({ role }) => kit.roleSource(role),
      content: (message) => message.content,
    }),
  repeatable: true,
  howTo:
    "conversationId (your chat id: useChat's `id` of the request body, or ({ options }) => options.context?.chatId) or turnId (the id of the user message)",
};

const wrapSet = (tools: unknown, options: unknown, caller: string) =>
  kit.wrapToolSet<ToolCallInfo, Tool>(tools, options, { ...SET, caller }, (adapter) => {
    const approvals = createApprovals(adapter.executor);
    return (name, tool) => wrapTool(name, tool, adapter, approvals, caller);
  });

/**
 * Make a tool set idempotent: each tool's `execute` becomes a lookup first, so a repeat of the
 * same call in the same turn of the same conversation replays the stored output (marked
 * `replayed: true`) instead of running the side effect again. Every other field is kept; tools
 * without `execute` (provider-executed) are returned untouched. In a useChat route, wrap per
 * request with the chat id: `idempotentTools(tools, { store, conversationId: id })`.
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
  return kit.wrapOneTool(name, tool, options, 'idempotentTool', wrapSet);
}
