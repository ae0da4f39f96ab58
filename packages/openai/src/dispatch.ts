/**
 * Dispatch helpers for the OpenAI APIs: run the function calls of a Chat Completions message or
 * of a Responses output idempotently and return the ready-to-send tool messages / outputs.
 */
import type { Idempotency, ToolPolicy } from '@idempotent-tools/core';
import {
  type AdapterOptions,
  createDispatcher,
  createTurnLinks,
  type DispatchCall,
  outputsOf,
  type RepeatablePolicy,
  type ToolErrorOutputOption,
  type ToolHandler,
  type RequestIdentity as TurnOptions,
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
import { type Anchor, anchorOf, chatTranscript, inputItems, refusalOf } from './turns.js';

export type {
  DispatchCall,
  RequestIdentity as TurnOptions,
  ToolHandler,
} from '@idempotent-tools/core/adapter-kit';

/**
 * The kit's options; `toolErrorOutput`: the tool's own errors are rethrown (as `runTools` does).
 * A policy may say `repeatable` (deliberate repeats: `describe` adds the `repeat` argument).
 */
export type ToolDispatcherOptions = AdapterOptions<
  DispatchCall,
  ToolPolicy<never, unknown> & RepeatablePolicy
> &
  ToolErrorOutputOption;

type FunctionCall = { callId: string; name: string; arguments: string };
type DescribedTool =
  | {
      type: string;
      name?: string;
      description?: string | null;
      parameters?: unknown;
      strict?: boolean | null;
    }
  | {
      type: string;
      function: {
        name: string;
        description?: string;
        parameters?: unknown;
        strict?: boolean | null;
      };
    };
const turnOf = Symbol('turn');
type Call = DispatchCall & {
  [turnOf]: { transcript?: unknown[] | undefined; anchor?: Anchor | undefined };
};
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
  const dispatcher = createDispatcher<Call>(
    handlers,
    { ...options, idempotency },
    {
      caller,
      options: ['toolErrorOutput'],
      howTo:
        'conversationId (your chat id: runChat(message, { messages, conversationId }), or the option as a function of the call) or turnId (your id of the user message)',
      turn: ({ [turnOf]: { anchor } }) => (anchor && 'turn' in anchor ? anchor.turn : undefined),
      refusal: ({ [turnOf]: { anchor } }) => refusalOf(anchor),
      transcript: ({ [turnOf]: { anchor, transcript } }) =>
        (anchor === undefined
          ? transcript
          : 'said' in anchor
            ? [{ role: 'user', content: anchor.said }]
            : undefined) as never,
    },
  );
  const links = createTurnLinks<Anchor>(dispatcher.adapter.executor);

  /** The outputs of the calls, in order; the tool's own errors as `toolErrorOutput` says. */
  async function runAll(
    calls: FunctionCall[],
    request: TurnOptions,
    turn: Call[typeof turnOf],
    beforeRun?: (turnId: string) => Promise<void>,
  ) {
    const outcomes = await dispatcher.run(calls, {
      info: (toolName, args) => ({ toolName, args, request, [turnOf]: turn }),
      ...(beforeRun && { beforeRun }),
    });
    return outputsOf(outcomes, options.toolErrorOutput);
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
      // The next request may chain from this response (`previous_response_id`, also from the
      // first turn of a conversation, sent whole) and carry only the outputs: link the turn to
      // the calls, in the store, so that a later step in any process finds it.
      const first = calls[0]?.callId;
      const link = (turnId: string) => links.remember([first as string], { turn: turnId }, true);
      const outputs = await runAll(calls, turn, { anchor }, link);
      return calls.map((c, i) => ({
        type: 'function_call_output',
        call_id: c.callId,
        output: content(outputs[i]),
      }));
    },
    /**
     * Copies of your tool definitions (Chat Completions or Responses) with the retry notes
     * appended, and the `repeat` argument in the parameters of a `repeatable` tool.
     * @throws ConfigurationError when a repeatable tool's parameters have their own `repeat`
     */
    describe<T extends DescribedTool>(tools: readonly T[]): T[] {
      const withParameters = <
        F extends { name?: string; parameters?: unknown; strict?: boolean | null },
      >(
        fn: F,
      ): F => {
        const parameters = dispatcher.parameters(fn.name, fn.parameters, fn.strict === true);
        return parameters === fn.parameters ? fn : { ...fn, parameters };
      };
      return tools.map((tool): T => {
        if (!('function' in tool)) {
          return withParameters(dispatcher.describe(tool as T & { name?: string }));
        }
        const fn = withParameters(dispatcher.describe(tool.function));
        return fn === tool.function ? tool : { ...tool, function: fn };
      });
    },
  };
}

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
