/**
 * A dispatcher for hand-written Messages API loops: run the `tool_use` blocks of a reply
 * idempotently and return the user message of `tool_result` blocks that answers them.
 */
import { toolErrorContent } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages';
import type { Idempotency } from '@idempotent-tools/core';
import {
  boxedOutputs,
  createDispatcher,
  type DispatchCall,
  type DispatcherOptions,
  type DispatchOutcome,
  markWrapped,
  presentDefinition,
  type ToolHandler,
  type RequestIdentity as TurnOptions,
  toolResultOf,
} from '@idempotent-tools/core/adapter-kit';
import { transcriptOf } from './messages.js';

/** The kit's options; a policy may say `repeatable` (deliberate repeats, see the README). */
export type ToolDispatcherOptions = DispatcherOptions;

type ToolUse = { type: 'tool_use'; id: string; name: string; input: unknown };
const caller = 'createToolDispatcher';
const said = Symbol('transcript');
type Call = DispatchCall & { [said]: ReturnType<typeof transcriptOf> };

/**
 * Runs the tool calls of a Messages API reply, idempotently (see the README).
 * @throws ConfigurationError for a bad handler, option or policy, and for a handler that is
 *   already idempotent (`idempotency.wrap`'s function: its call would wait for itself)
 */
export function createToolDispatcher(
  idempotency: Idempotency,
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Record<string, ToolHandler<any, unknown>>,
  options: ToolDispatcherOptions = {},
) {
  // Each handler is checked, and one that is already idempotent refused, by `createDispatcher`.
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
  const boxed = boxedOutputs(dispatcher); // tell the tools' outputs from the model's error texts

  return markWrapped({
    /**
     * The user message of one `tool_result` per `tool_use` block of `reply`, in order. Pass the
     * `messages` of the request that produced `reply`.
     * @throws ConfigurationError when a call's turn cannot be identified (nothing ran)
     */
    async run(
      reply: { content: readonly { type: string }[] },
      turn: TurnOptions & { messages?: readonly { role: string; content?: unknown }[] } = {},
    ): Promise<{ role: 'user'; content: ToolResultBlockParam[] }> {
      const uses = reply.content.filter((b): b is ToolUse => b.type === 'tool_use');
      const transcript = transcriptOf(turn.messages);
      const outcomes = await dispatcher.run(
        uses.map((use) => ({ name: use.name, arguments: use.input })),
        {
          ...boxed,
          info: (toolName, args) => ({ toolName, args, request: turn, [said]: transcript }),
        },
      );
      return {
        role: 'user',
        content: uses.map((use, i) => {
          // The tool's own error: its claim was released, so a retry runs again.
          const result = toolResultOf(outcomes[i] as DispatchOutcome<Call>, toolErrorContent);
          const content = result.content as NonNullable<ToolResultBlockParam['content']>;
          return {
            type: 'tool_result',
            tool_use_id: use.id,
            content,
            ...(result.isError && { is_error }),
          };
        }),
      };
    },
    /**
     * Copies of your tool definitions with the retry notes appended to their descriptions, and
     * the `repeat` argument in the `input_schema` of a `repeatable` tool.
     * @throws ConfigurationError when a repeatable tool's input_schema has its own `repeat`
     */
    describe<
      T extends {
        name?: string;
        description?: string | undefined;
        input_schema?: unknown;
        strict?: boolean | undefined;
      },
    >(tools: readonly T[]): T[] {
      // Built-in client tools (no input_schema) get the description only.
      return tools.map((tool) =>
        presentDefinition(dispatcher, tool, {
          caller,
          field: 'input_schema' in tool ? 'input_schema' : undefined,
          strict: tool.strict === true,
        }),
      );
    },
  });
}

const is_error = true;

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
