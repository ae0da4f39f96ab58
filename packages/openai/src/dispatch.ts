/**
 * Dispatch helpers for the OpenAI APIs: run the function calls of a Chat Completions message or
 * of a Responses output idempotently and return the ready-to-send tool messages / outputs.
 */
import {
  ConfigurationError,
  type ExecutionContext,
  type Idempotency,
  InvalidInputError,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type AdapterOptions,
  checkPerCall,
  createAdapter,
  createTurnLinks,
  errorText,
  type PerCall,
  parseArguments,
  runCall,
  type StandardSchema,
  unwrappedContext,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions';
import type {
  Response,
  ResponseCreateParams,
  ResponseInputItem,
  ResponseOutputItem,
} from 'openai/resources/responses/responses';
import { type Anchor, anchorOf, chatTranscript, inputItems, refusal } from './turns.js';

/** One tool: a function, or `{ execute, schema }`. */
export type ToolHandler<Args = never, Result = unknown> =
  | ((args: Args, context: ExecutionContext) => Result | Promise<Result>)
  | {
      execute: (args: Args, context: ExecutionContext) => Result | Promise<Result>;
      /** Checks the parsed arguments before anything runs; a Standard Schema's output becomes the args. */
      schema?: StandardSchema<Args> | ValidateFunction;
    };

/** Which turn the calls of one `runChat` / `runResponses` belong to, and for whom. */
export interface TurnOptions {
  /** Your id of the user turn (e.g. of the user message). Wins over every other source. */
  turnId?: string | undefined;
  /** Your chat / thread id: with it the turn is derived from the conversation's user messages. */
  conversationId?: string | undefined;
  /** Overrides the dispatcher's scope for these calls. */
  scope?: string | undefined;
}

/** One call as the `turnId`, `conversationId` and `scope` functions of the options get it. */
export interface DispatchCall {
  toolName: string;
  args: unknown;
  /** The second argument of `runChat` / `runResponses` (its turn options, messages, input...). */
  request: Readonly<TurnOptions>;
}

export interface ToolDispatcherOptions
  extends AdapterOptions<DispatchCall, ToolPolicy<never, unknown>> {
  /**
   * The tool's own errors: by default they are rethrown once every call of the message settled
   * (as openai's `runTools` does); the claim is released, so a retry runs again. Give a function
   * to send them to the model instead, as the tool's output. @default undefined (rethrow)
   */
  toolErrorOutput?: (error: unknown, call: { toolName: string; args: unknown }) => unknown;
}

type FunctionCall = { callId: string; name: string; arguments: string };
type DescribedTool =
  | { type: string; name?: string; description?: string | null }
  | { type: string; function: { name: string; description?: string } };
const turnOf = Symbol('turn');
type Call = DispatchCall & { [turnOf]: { transcript?: unknown[]; anchor?: Anchor | undefined } };
const caller = 'createToolDispatcher';

const content = (value: unknown): string =>
  typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');

/**
 * Runs the function calls the model asked for, idempotently.
 *
 * ```ts
 * const tools = createToolDispatcher(idempotency, { create_ticket: { schema, execute } });
 * messages.push(message, ...(await tools.runChat(message, { messages, conversationId: chat.id })));
 * ```
 */
export function createToolDispatcher(
  idempotency: Idempotency,
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Record<string, ToolHandler<any, unknown>>,
  options: ToolDispatcherOptions = {},
) {
  const names = Object.keys(handlers ?? {});
  const executeOf = (name: string) => {
    const h = handlers[name];
    return typeof h === 'function' ? h : h?.execute;
  };
  for (const name of names) {
    if (typeof executeOf(name) !== 'function') {
      throw new ConfigurationError({
        option: 'handlers',
        message: `${caller}: the handler of tool "${name}" must be a function or { execute, schema? }.`,
      });
    }
  }
  checkPerCall('turnId', options.turnId, caller);
  checkPerCall('conversationId', options.conversationId, caller);
  const given = (value: PerCall<DispatchCall> | undefined, call: Call) =>
    typeof value === 'function' ? value(call) : value;
  const adapter = createAdapter<Call>(
    {
      ...options,
      idempotency,
      turnId: (call) => call.request.turnId ?? given(options.turnId, call),
      conversationId: (call) => call.request.conversationId ?? given(options.conversationId, call),
    },
    {
      caller,
      toolNames: names,
      options: ['toolErrorOutput'],
      howTo:
        'conversationId (your chat id: runChat(message, { messages, conversationId }), or the option as a function of the call) or turnId (your id of the user message)',
      turn: ({ [turnOf]: { anchor } }) => (anchor && 'turn' in anchor ? anchor.turn : undefined),
      transcript: ({ [turnOf]: { anchor, transcript } }) =>
        (anchor === undefined
          ? transcript
          : 'said' in anchor
            ? [{ role: 'user', content: anchor.said }]
            : undefined) as never,
    },
  );
  const links = createTurnLinks<Anchor>(adapter.executor);

  /** Parse every call, identify every wrapped one (developer errors before anything runs), run. */
  async function runAll(
    calls: FunctionCall[],
    request: TurnOptions,
    turn: Call[typeof turnOf],
    link?: (turnId: string) => Promise<void>,
  ) {
    const prepared = await Promise.all(
      calls.map(async (c) => {
        if (handlers[c.name] === undefined) {
          const message = `There is no tool named "${c.name}". Nothing ran. Call one of: ${names.join(', ')}.`;
          return { output: errorText(new InvalidInputError({ field: 'name', message })) };
        }
        const handler = handlers[c.name];
        const schema = typeof handler === 'function' ? undefined : handler?.schema;
        const parsed = await parseArguments(c.name, c.arguments, schema);
        if ('error' in parsed) return { output: parsed.error };
        return { call: { toolName: c.name, args: parsed.args, request, [turnOf]: turn } as Call };
      }),
    );
    let turnId: string | undefined;
    const identified = prepared.map((p) => {
      if (p.call === undefined) return undefined;
      const wrapped = adapter.treatment(p.call.toolName) === 'wrap';
      try {
        const id = adapter.identify(p.call, p.call.toolName);
        turnId ??= id.turnId;
        return wrapped ? id : undefined;
      } catch (error) {
        if (wrapped) throw refusal(error, turn.anchor, caller);
        return undefined;
      }
    });
    if (turnId !== undefined) await link?.(turnId);
    const settled = await Promise.all(
      prepared.map(async ({ call, output }, i) => {
        if (call === undefined) return { output, call };
        const { toolName, args } = call;
        const id = identified[i];
        const scope = request.scope ?? id?.scope ?? given(options.scope, call);
        const execute = executeOf(toolName) as (args: unknown, ctx: ExecutionContext) => unknown;
        if (id !== undefined) {
          const ran = await runCall(adapter, { toolName, turnId: id.turnId, scope, args }, execute);
          return { ...ran, call };
        }
        try {
          return { output: await execute(args, unwrappedContext(toolName, turnId, scope)), call };
        } catch (error) {
          return { error, developer: false, call };
        }
      }),
    );
    const forDeveloper = settled.find((s) => 'developer' in s && s.developer);
    if (forDeveloper !== undefined && 'error' in forDeveloper) throw forDeveloper.error;
    return settled.map((s) => {
      if ('output' in s) return s.output;
      if (options.toolErrorOutput === undefined) throw s.error;
      const { toolName, args } = s.call as Call;
      return options.toolErrorOutput(s.error, { toolName, args });
    });
  }

  return {
    /** The tool messages answering the `tool_calls` of a Chat Completions assistant message, in order. */
    async runChat(
      message: Pick<ChatCompletionMessage, 'tool_calls'>,
      turn: TurnOptions & {
        /** The `messages` of the request that produced `message`: the turn is derived from them. */
        messages?: readonly ChatCompletionMessageParam[];
      } = {},
    ): Promise<ChatCompletionToolMessageParam[]> {
      const calls = (message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ callId: c.id, ...c.function }] : [],
      );
      const transcript = chatTranscript((turn.messages ?? []) as never);
      const outputs = await runAll(calls, turn, { transcript });
      return calls.map((c, i) => ({
        role: 'tool',
        tool_call_id: c.callId,
        content: content(outputs[i]),
      }));
    },
    /**
     * The `function_call_output` items answering the `function_call` items of a response, in
     * order. Pass the request you sent (its `input`, `previous_response_id`, `conversation`).
     */
    async runResponses(
      response: Pick<Response, 'output'> | readonly ResponseOutputItem[],
      turn: TurnOptions &
        Pick<ResponseCreateParams, 'input' | 'previous_response_id' | 'conversation'> = {},
    ): Promise<ResponseInputItem.FunctionCallOutput[]> {
      const output = 'output' in response ? response.output : response;
      const calls = output.flatMap((item) =>
        item.type === 'function_call'
          ? [{ callId: item.call_id, name: item.name, arguments: item.arguments }]
          : [],
      );
      const chain = { previous: turn.previous_response_id, conversation: turn.conversation };
      const anchor =
        calls.length === 0 ? undefined : await anchorOf(inputItems(turn.input), chain, links);
      // The next request of a chained turn carries only the outputs: link the turn to the calls.
      const chained = chain.previous != null || chain.conversation != null;
      const first = calls[0]?.callId;
      const link = (turnId: string) => links.remember([first as string], { turn: turnId }, true);
      const outputs = await runAll(calls, turn, { anchor }, chained ? link : undefined);
      return calls.map((c, i) => ({
        type: 'function_call_output',
        call_id: c.callId,
        output: content(outputs[i]),
      }));
    },
    /** Copies of your tool definitions (Chat Completions or Responses) with the retry notes appended. */
    describe<T extends DescribedTool>(tools: readonly T[]): T[] {
      return tools.map((tool) => {
        const fn = ('function' in tool ? tool.function : tool) as {
          name?: string;
          description?: string | null;
        };
        const name = fn.name ?? '';
        if (!names.includes(name) || adapter.treatment(name) === 'exclude') return tool;
        const safe = adapter.treatment(name) === 'wrap';
        const description = withRetryNote(fn.description ?? undefined, safe);
        return 'function' in tool
          ? { ...tool, function: { ...tool.function, description } }
          : { ...tool, description };
      });
    },
  };
}

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
