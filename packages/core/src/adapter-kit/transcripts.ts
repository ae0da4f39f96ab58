/**
 * A conversation as the turn derivation reads it (docs/design.md, "Turn identity"). One rule for
 * every framework: a user message is a user turn with what the user wrote in it; anything from
 * the model or a tool after it (assistant text, a tool call, a tool result) **answers** it; system
 * and developer prompts are neither. Adapters only say who each message is from and where its
 * content is (`TranscriptReader`); what counts as the content is `userContent`'s.
 */
import type { TranscriptEntry } from './turn-identity.js';

/**
 * Who a message of a conversation is from. `partial`: from the model or a tool, in a history that
 * also keeps what a broken run stored before it failed (a checkpointer, a memory), when the
 * adapter cannot tell whether the run answered: an answer, unless the next user message repeats
 * the words of the turn before (then the derivation refuses, naming `turnId`).
 */
export type MessageSource = 'user' | 'model' | 'tool' | 'partial' | 'prompt';

/** How an adapter reads the messages of its framework. */
export interface TranscriptReader<Message> {
  /**
   * Who the message is from: `user` (the user wrote it), `model` (assistant text, tool calls,
   * reasoning), `tool` (a tool's result), `prompt` (system and developer messages: never a turn,
   * never an answer); undefined leaves the message out (a reference to another message).
   */
  from(message: Message): MessageSource | undefined;
  /** The content of a user message, as the framework holds it (a string, parts, `{ parts }`). */
  content(message: Message): unknown;
  /**
   * Whether a part of a user message is a tool's result (Anthropic's `tool_result` blocks,
   * Gemini's `functionResponse` parts): it answers the turn before it and is not what the user
   * wrote. @default never
   */
  isToolResult?(part: unknown): boolean;
}

/** A message's content as parts: a string is one part, a holder `{ parts }` its parts. */
function partsOf(content: unknown): unknown[] | undefined {
  if (Array.isArray(content)) return content;
  const parts = (content as { parts?: unknown } | null | undefined)?.parts;
  return Array.isArray(parts) ? parts : undefined;
}

/**
 * The transcript of a conversation's messages (undefined for no messages): user turns with
 * their content, and an answer for everything from the model or a tool.
 */
export function readTranscript<Message>(
  messages: Iterable<Message> | undefined,
  reader: TranscriptReader<Message>,
): TranscriptEntry[] | undefined {
  if (messages === undefined) return undefined;
  const entries: TranscriptEntry[] = [];
  for (const message of messages) {
    const from = reader.from(message);
    if (from === undefined || from === 'prompt') continue;
    if (from !== 'user') {
      entries.push(from === 'partial' ? { role: 'answer', partial: true } : { role: 'answer' });
      continue;
    }
    const content = reader.content(message);
    const parts = partsOf(content);
    if (parts === undefined) {
      entries.push({ role: 'user', content });
      continue;
    }
    const isToolResult = reader.isToolResult;
    const said = isToolResult === undefined ? parts : parts.filter((part) => !isToolResult(part));
    // Tool results come first in a user message (Anthropic requires it): they answer the turn
    // before; the rest, if any, is a new user turn.
    if (said.length < parts.length) entries.push({ role: 'answer' });
    if (said.length > 0) entries.push({ role: 'user', content: said });
  }
  return entries;
}
