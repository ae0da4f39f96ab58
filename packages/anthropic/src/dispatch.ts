/**
 * A dispatcher for hand-written Messages API loops: run the `tool_use` blocks of a reply
 * (`messages.create`, `messages.stream(...).finalMessage()`, a thread's `send`) idempotently and
 * return the user message of `tool_result` blocks that answers them.
 */
import { toolErrorContent } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages';
import type { ExecutionContext, Idempotency, ToolPolicy } from '@idempotent-tools/core';
import {
  type AdapterOptions,
  createDispatcher,
  type DispatchCall,
  type ToolHandler,
  type RequestIdentity as TurnOptions,
} from '@idempotent-tools/core/adapter-kit';
import { markResult, resultContent, transcriptOf } from './messages.js';

export type {
  DispatchCall,
  RequestIdentity as TurnOptions,
  ToolHandler,
} from '@idempotent-tools/core/adapter-kit';

export type ToolDispatcherOptions = AdapterOptions<DispatchCall, ToolPolicy<never, unknown>>;

type ToolUse = { type: 'tool_use'; id: string; name: string; input: unknown };
type Conversation = readonly { role: string; content?: unknown }[];
const said = Symbol('transcript');
type Call = DispatchCall & { [said]: ReturnType<typeof transcriptOf> };
const caller = 'createToolDispatcher';
/** Marks what a tool returned, apart from the model's error texts the kit hands back as output. */
const ok = Symbol('ok');

/**
 * Runs the tool calls of a Messages API reply, idempotently.
 *
 * ```ts
 * const tools = createToolDispatcher(idempotency, { create_ticket: { schema, execute } });
 * messages.push({ role: 'assistant', content: reply.content });
 * messages.push(await tools.run(reply, { messages, conversationId: chat.id }));
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
      howTo:
        'conversationId (your chat id: tools.run(reply, { messages, conversationId }), or the option as a function of the call) or turnId (your id of the user message)',
      transcript: (call) => call[said],
    },
  );
  const { adapter } = dispatcher;
  // What runs: the handler; an unwrapped one's output gets the mark that wrapped outputs get.
  const handler = (name: string) => {
    const h = dispatcher.handler(name);
    if (h === undefined || adapter.treatment(name) === 'wrap') return h;
    const execute = async (args: unknown, context: ExecutionContext, call: Call) => ({
      [ok]: await h.execute(args, context, call),
    });
    return { ...h, execute };
  };

  return {
    /**
     * The user message answering the `tool_use` blocks of `reply`: one `tool_result` per call,
     * in order. Pass the `messages` of the request that produced `reply`. Bad input, an
     * idempotency error or the tool's own error is an `is_error` result.
     *
     * @throws ConfigurationError when a call's turn cannot be identified (nothing ran)
     */
    async run(
      reply: { content: readonly { type: string }[] },
      turn: TurnOptions & { messages?: Conversation } = {},
    ): Promise<{ role: 'user'; content: ToolResultBlockParam[] }> {
      const uses = reply.content.filter((b): b is ToolUse => b.type === 'tool_use');
      const transcript = transcriptOf(turn.messages);
      const outcomes = await dispatcher.run(
        uses.map((use) => ({ name: use.name, arguments: use.input })),
        {
          handler,
          info: (toolName, args) => ({ toolName, args, request: turn, [said]: transcript }),
          mark: (value, replayed) => ({ [ok]: markResult(value, replayed, adapter.markFresh) }),
        },
      );
      return {
        role: 'user',
        content: uses.map((use, i) => {
          const outcome = outcomes[i] as { output: unknown } | { error: unknown };
          const fine = 'output' in outcome && typeof outcome.output === 'object';
          const content = (
            'error' in outcome
              ? toolErrorContent(outcome.error) // the claim was released: a retry runs again
              : fine
                ? resultContent((outcome.output as { [ok]: unknown })[ok])
                : outcome.output
          ) as NonNullable<ToolResultBlockParam['content']>; // the model's error text (bad input, an idempotency error)
          return { type: 'tool_result', tool_use_id: use.id, content, ...(!fine && { is_error }) };
        }),
      };
    },
    /** Copies of your tool definitions with the retry notes appended to their descriptions. */
    describe<T extends { name?: string; description?: string | undefined }>(
      tools: readonly T[],
    ): T[] {
      return tools.map((tool) => dispatcher.describe(tool));
    },
  };
}

const is_error = true;

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
