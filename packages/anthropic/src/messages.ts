/**
 * What both surfaces read from the Messages API's shapes: the user turns of a conversation and
 * a tool's output as `tool_result` content with its replay mark.
 */
import {
  isContentBlocks,
  markContent,
  markOutput,
  type TranscriptEntry,
} from '@idempotent-tools/core/adapter-kit';

type Block = { type: string; [field: string]: unknown };

/** What the user wrote in a message: its blocks without tool results and cache markers. */
function authored(content: unknown): Block[] {
  const blocks: Block[] =
    typeof content === 'string'
      ? [{ type: 'text', text: content }]
      : Array.isArray(content)
        ? content
        : [];
  // A thread re-sends answered messages without their cache_control: it is not the user's.
  return blocks
    .filter((block) => block.type !== 'tool_result')
    .map(({ cache_control: _, ...block }) => block);
}

/**
 * The conversation as the turn derivation reads it: a `user` message with something the user
 * wrote (not only `tool_result` blocks) is a user turn; an `assistant` message without `tool_use`
 * ends a turn; `system` messages, tool calls and tool results never count.
 */
export function transcriptOf(
  messages: readonly { role: string; content?: unknown }[] | undefined,
): (TranscriptEntry | undefined)[] | undefined {
  return messages?.map((message): TranscriptEntry | undefined => {
    if (message.role === 'user') {
      const said = authored(message.content);
      return said.length > 0 ? { role: 'user', content: said } : undefined;
    }
    const calls =
      Array.isArray(message.content) &&
      (message.content as Block[]).some((block) => block.type === 'tool_use');
    return message.role === 'assistant' && !calls ? { role: 'answer' } : undefined;
  });
}

/**
 * A tool's output with its replay mark, keeping its shape: text stays text (a JSON object's text
 * gets `"replayed"` merged in, other text a `{"replayed":true}` line), content blocks stay blocks
 * (the mark in the last text block), any other value gets `"replayed"` as a field.
 */
export function markResult(value: unknown, replayed: boolean, markFresh: boolean): unknown {
  if (!replayed && !markFresh) return value;
  if (typeof value !== 'string') return markOutput(value, replayed, markFresh);
  return (markContent([{ type: 'text', text: value }], replayed)[0] as { text: string }).text;
}

/** `tool_result` content: text and content blocks as they are, any other value as JSON text. */
export const resultContent = (value: unknown): string | Block[] =>
  typeof value === 'string' || isContentBlocks(value)
    ? (value as string | Block[])
    : (JSON.stringify(value) ?? 'null');
