/**
 * Dispatch helpers for the OpenAI APIs: run the function calls of a Chat Completions message or
 * of a Responses output idempotently and return the ready-to-send tool messages / outputs.
 */
import type { Idempotency } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type * as Chat from 'openai/resources/chat/completions';
import type * as Responses from 'openai/resources/responses/responses';
import { chatTranscript, requestTurns, responsesTurn } from './turns.js';

/** Which turn the calls of one request belong to, and for whom. */
export type TurnOptions = kit.RequestIdentity;

/**
 * The kit's options; `toolErrorOutput`: the tool's own errors are rethrown (as `runTools` does).
 * A policy may say `repeatable` (deliberate repeats: `describe` adds the `repeat` argument).
 */
export type ToolDispatcherOptions = kit.DispatcherOptions & kit.ToolErrorOutputOption;

/** A tool definition's function: a Responses tool, or a Chat Completions tool's `function`. */
type Definition = { name?: string; description?: string | null; strict?: boolean | null };
type Turn = { transcript?: kit.TranscriptEntry[] | undefined; anchor?: kit.TurnAnchor | undefined };
const turnOf = Symbol('turn');
type Call = kit.DispatchCall & { [turnOf]: Turn };

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
  handlers: Record<string, kit.ToolHandler<any, unknown>>,
  options: ToolDispatcherOptions = {},
) {
  const caller = 'createToolDispatcher';
  const anchor = kit.anchorSources<Call>((call) => call[turnOf].anchor);
  const dispatcher = kit.createDispatcher<Call>(
    handlers,
    { ...options, idempotency },
    {
      caller,
      options: ['toolErrorOutput'],
      howTo:
        'conversationId (your chat id: runChat(message, { messages, conversationId }), or the option as a function of the call) or turnId (your id of the user message)',
      ...anchor,
      transcript: (call) => call[turnOf].transcript ?? anchor.transcript(call),
    },
  );
  const turns = requestTurns(dispatcher.adapter.executor);

  /** The outputs of the calls, in order, as text; the tool's own errors as `toolErrorOutput` says. */
  async function runAll(
    calls: { name: string; arguments: string }[],
    request: TurnOptions,
    turn: Turn,
    beforeRun?: (turnId: string) => Promise<void>,
  ): Promise<string[]> {
    const outcomes = await dispatcher.run(calls, {
      info: (toolName, args) => ({ toolName, args, request, [turnOf]: turn }),
      ...(beforeRun && { beforeRun }),
    });
    return kit
      .outputsOf(outcomes, options.toolErrorOutput)
      .map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? 'null')));
  }

  /** A copy of a definition with the retry note, and the `repeat` argument of a repeatable tool. */
  const present = <F extends Definition>(fn: F): F =>
    kit.presentDefinition(dispatcher, fn, {
      caller,
      field: 'parameters',
      strict: fn.strict === true,
    });

  return {
    /** The tool messages answering the `tool_calls` of a Chat Completions assistant message, in order. */
    async runChat(
      message: Pick<Chat.ChatCompletionMessage, 'tool_calls'>,
      turn: TurnOptions & {
        /** The `messages` of the request that produced `message`: the turn is derived from them. */
        messages?: readonly Chat.ChatCompletionMessageParam[];
      } = {},
    ): Promise<Chat.ChatCompletionToolMessageParam[]> {
      const calls = (message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ id: c.id, ...c.function }] : [],
      );
      const transcript = chatTranscript((turn.messages ?? []) as never);
      const outputs = await runAll(calls, turn, { transcript });
      return calls.map((c, i) => ({ role: 'tool', tool_call_id: c.id, content: outputs[i] ?? '' }));
    },
    /**
     * The `function_call_output` items answering the `function_call` items of a response, in
     * order. Pass the request you sent (its `input`, `previous_response_id`, `conversation`).
     */
    async runResponses(
      response: Pick<Responses.Response, 'output'> | readonly Responses.ResponseOutputItem[],
      turn: TurnOptions &
        Pick<
          Responses.ResponseCreateParams,
          'input' | 'previous_response_id' | 'conversation'
        > = {},
    ): Promise<Responses.ResponseInputItem.FunctionCallOutput[]> {
      const output = 'output' in response ? response.output : response;
      const calls = output.flatMap((item) => (item.type === 'function_call' ? [item] : []));
      const chain = { previous: turn.previous_response_id, conversation: turn.conversation };
      const anchor =
        calls.length === 0 ? undefined : await turns.anchor(responsesTurn(turn.input, chain));
      // The next request may chain from this response and carry only the outputs.
      const link = turns.linkTurn(calls.map((c) => c.call_id));
      const outputs = await runAll(calls, turn, { anchor }, link);
      return calls.map((c, i) => ({
        type: 'function_call_output',
        call_id: c.call_id,
        output: outputs[i] ?? '',
      }));
    },
    /**
     * Copies of your tool definitions (Chat Completions or Responses) with the retry notes
     * appended, and the `repeat` argument in the parameters of a `repeatable` tool.
     * @throws ConfigurationError when a repeatable tool's parameters have their own `repeat`
     */
    describe<T extends ({ type: string } & Definition) | { type: string; function: Definition }>(
      tools: readonly T[],
    ): T[] {
      return tools.map((tool): T => {
        if (!('function' in tool)) return present(tool as T & Definition);
        const fn = present(tool.function);
        return fn === tool.function ? tool : { ...tool, function: fn };
      });
    },
  };
}

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
