/**
 * Idempotent function calling for `@google/genai`: local functions or a wrapped `CallableTool`
 * (e.g. `mcpToTool(client)`), run once per logical call, for hand-written loops (`run`: function
 * calls -> `functionResponse` parts) and for the SDK's automatic function calling (`callable`).
 */

import type {
  CallableTool,
  FunctionCall,
  FunctionDeclaration,
  FunctionResponsePart,
  Part,
  Tool,
} from '@google/genai';
import {
  ConfigurationError,
  type ExecutionContext,
  type ExecutorOptions,
  markReplayed,
} from '@idempotent-tools/core';
import {
  createDispatcher,
  type DispatchCall,
  type DispatcherOptions,
  type DispatchHandler,
  markWrapped,
  outputsOf,
  presentDefinition,
  refuseWrapped,
  type StandardSchema,
  type ToolErrorOutputOption,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
import { type GeminiTurn, transcriptOf } from './turns.js';

/** One local function: what the model sees of it, and what runs. */
export interface FunctionHandler<Args = never, Result = unknown> {
  /** The declaration without its name (the key of the handler): description, parametersJsonSchema... */
  declaration?: Omit<FunctionDeclaration, 'name'>;
  /** Runs the call. An object is the `response` the model reads; anything else is `{ output }`. */
  execute: (args: Args, context: ExecutionContext) => Result | Promise<Result>;
  /** Checks the model's arguments before anything runs; a Standard Schema's output becomes the args. */
  schema?: StandardSchema<Args> | ValidateFunction;
}

/** One call, as the `turnId`, `conversationId` and `scope` functions get it (`request`: the turn). */
export type FunctionCallInfo = DispatchCall<GeminiTurn>;

/** `toolErrorOutput`: errors are rethrown out of `run` (or `generateContent` with AFC). */
export type IdempotentFunctionsOptions = ExecutorOptions &
  DispatcherOptions<FunctionCallInfo> &
  ToolErrorOutputOption<Record<string, unknown>>;

export interface IdempotentFunctions {
  /** The function declarations with their retry notes, for `config.tools` (manual dispatch). */
  readonly tool: Tool;
  /**
   * The `functionResponse` parts answering the function calls of a response (or the calls you
   * gathered from a stream's chunks), in order. Send them back as `{ role: 'user', parts }`.
   */
  run(
    calls: readonly FunctionCall[] | { functionCalls?: FunctionCall[] | undefined },
    turn?: GeminiTurn,
  ): Promise<Part[]>;
  /**
   * A `CallableTool` for automatic function calling in one request: put it in `config.tools` of
   * that `generateContent` / `generateContentStream` / `chat.sendMessage`. The SDK hands a
   * callable tool only the function calls, so the turn is bound here, per request. It answers
   * the calls of its own functions only (the SDK hands every callable tool all the calls).
   * @throws ConfigurationError when the turn cannot be identified (nothing is sent)
   */
  callable(turn?: GeminiTurn): CallableTool;
}

/** What one call answers the model, stored as the call's outcome. */
type Body = { response: Record<string, unknown>; parts?: FunctionResponsePart[] };
/** The adapter's call info: the call's id too, for a wrapped `CallableTool` (never the turn). */
type Info = FunctionCallInfo & { id?: string | undefined };
type Handler = DispatchHandler<Info>;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function make(
  caller: string,
  declarations: readonly FunctionDeclaration[],
  handlers: Record<string, Handler>,
  options: IdempotentFunctionsOptions,
): IdempotentFunctions {
  const dispatcher = createDispatcher<Info>(handlers, options as never, {
    caller,
    options: ['toolErrorOutput'],
    transcript: (call) => transcriptOf(call.request),
    howTo:
      'conversationId (your chat id, with the contents: run(response, { contents, conversationId }) or callable({ contents, conversationId }); for a chat, { chat, conversationId }) or turnId (your id of the user message)',
  });
  const { markFresh } = dispatcher.adapter;
  const mark = (value: unknown, replayed: boolean) => {
    const body = value as Body;
    return { ...body, response: markReplayed(body.response, replayed, { markFresh }) };
  };
  /** The declaration the model sees: the retry note; a repeatable function's repeat argument. */
  const declare = (d: FunctionDeclaration): FunctionDeclaration =>
    presentDefinition(dispatcher, d, {
      caller,
      // The JSON Schema (`parametersJsonSchema`), or the OpenAPI-style `parameters` (`Type.OBJECT`...).
      ...(d.parameters === undefined
        ? { field: 'parametersJsonSchema' }
        : { field: 'parameters', openApi: true }),
    });
  const tool: Tool = { functionDeclarations: declarations.map(declare) };

  async function run(
    given: readonly FunctionCall[] | { functionCalls?: FunctionCall[] | undefined },
    request: GeminiTurn = {},
  ): Promise<Part[]> {
    const calls =
      (Array.isArray(given) ? given : (given as { functionCalls?: [] }).functionCalls) ?? [];
    const outcomes = await dispatcher.run(
      calls.map((c) => ({ name: c.name ?? '', arguments: c.args ?? {} })),
      { info: (toolName, args, i) => ({ toolName, args, request, id: calls[i]?.id }), mark },
    );
    const answer = options.toolErrorOutput;
    const outputs = outputsOf(outcomes, answer && ((e, c) => ({ response: answer(e, c) ?? {} })));
    return outputs.map((output, i): Part => {
      const { id, name = '' } = calls[i] as FunctionCall;
      const body: Body =
        typeof output === 'string' // the kit's error text for the model
          ? { response: { error: JSON.parse(output) } }
          : (output as Body);
      return { functionResponse: { ...(id === undefined ? {} : { id }), name, ...body } };
    });
  }

  // Marked (the object, `run`, each callable's `callTool`), so that wrapping them again is refused.
  return markWrapped({
    tool,
    run: markWrapped(run),
    callable(turn = {}) {
      dispatcher.checkTurn(turn); // nothing is sent when the turn is unknown
      // The SDK hands every callable tool all the calls: answer only ours (as mcpToTool does).
      const ours = (c: FunctionCall) => dispatcher.handler(c.name ?? '') !== undefined;
      const callTool = markWrapped((calls: FunctionCall[]) => run(calls.filter(ours), turn));
      return { tool: async () => tool, callTool };
    },
  });
}

/**
 * Local functions, run idempotently: a repeat of a call in the same turn of the same conversation
 * answers the stored response, marked `replayed: true`, and runs nothing.
 *
 * ```ts
 * const fns = idempotentFunctions({ create_ticket: { declaration, schema, execute } }, { store });
 * const parts = await fns.run(response, { contents, conversationId: chat.id });
 * ```
 * @throws ConfigurationError for a misspelt option, a bad policy, a tool name providers reject,
 *   a handler whose `execute` is already idempotent (`idempotency.wrap`'s function)
 */
export function idempotentFunctions(
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Record<string, FunctionHandler<any, unknown>>,
  options: IdempotentFunctionsOptions,
): IdempotentFunctions {
  const caller = 'idempotentFunctions';
  const entries = Object.entries(isObject(handlers) ? handlers : {});
  const bad = entries.find(([, h]) => !isObject(h) || typeof h.execute !== 'function');
  if (bad !== undefined) {
    const message = `${caller}: the handler of "${bad[0]}" must be { declaration?, schema?, execute }.`;
    throw new ConfigurationError({ option: 'handlers', message });
  }
  for (const [name, h] of entries) refuseWrapped(name, h, caller);
  const wrapped = entries.map(([name, h]): [string, Handler] => {
    const execute = async (args: unknown, ctx: ExecutionContext): Promise<Body> => {
      const value = await h.execute(args as never, ctx);
      return { response: isObject(value) ? value : { output: value } };
    };
    return [name, { schema: h.schema, execute }];
  });
  const declarations = entries.map(([name, h]) => ({ ...h.declaration, name }));
  return make(caller, declarations, Object.fromEntries(wrapped), options);
}

/**
 * A `CallableTool` (yours, or `mcpToTool(client)`) made idempotent: each function call runs
 * `tool.callTool([call])` once per logical call; a repeat answers its stored `functionResponse`,
 * marked `replayed: true`. Async: it reads the tool's declarations (`tool.tool()`) once.
 *
 * @throws ConfigurationError for a misspelt option, a bad policy, a tool name providers reject,
 *   a tool that is already idempotent (the `callable()` of `idempotentFunctions` or of this)
 */
export async function idempotentCallableTool(
  tool: CallableTool,
  options: IdempotentFunctionsOptions,
): Promise<IdempotentFunctions> {
  const caller = 'idempotentCallableTool';
  if (typeof tool?.tool !== 'function' || typeof tool.callTool !== 'function') {
    throw new ConfigurationError({
      option: 'tool',
      message: `${caller}: pass a CallableTool ({ tool(), callTool(functionCalls) }), e.g. mcpToTool(client).`,
    });
  }
  const declarations = (await tool.tool()).functionDeclarations ?? [];
  const names = declarations.map((d) => d.name).join(', ');
  refuseWrapped(names === '' ? 'the CallableTool' : names, tool, caller);
  const execute = async (args: unknown, _: ExecutionContext, { toolName: name, id }: Info) => {
    const parts = await tool.callTool([{ name, args: args as never, ...(id && { id }) }]);
    const answer = parts.find((p) => p.functionResponse !== undefined)?.functionResponse;
    if (answer === undefined) return { response: { output: parts } } satisfies Body;
    const { response = {}, parts: media } = answer;
    return { response, ...(media === undefined ? {} : { parts: media }) } satisfies Body;
  };
  const handlers = declarations.map(({ name }): [string, Handler] => [name ?? '', { execute }]);
  return make(caller, declarations, Object.fromEntries(handlers), options);
}
