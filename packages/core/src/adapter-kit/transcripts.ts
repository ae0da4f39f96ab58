/** The transcript of a chat API's messages, as the turn derivation reads it. */
import type { TranscriptEntry } from './turn-identity.js';

type Block = { type: string; [field: string]: unknown };

/** A message's content as blocks: a string is one text block, anything but an array none. */
export function contentBlocks(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? content : [];
}

/** How `chatTranscript` reads the messages of one API. */
export interface ChatTranscriptSpec<Message> {
  /** What the user wrote in a user message (its content without tool results, say). */
  authored: (message: Message) => readonly unknown[];
  /** Whether an assistant message calls tools (it does not end the turn). */
  calls: (message: Message) => boolean;
  /** The role of the model's messages. @default 'assistant' */
  answerRole?: string;
}

/**
 * The turns of a conversation: a `user` message with something the user wrote (`authored`) is
 * a user turn; an assistant message without tool calls ends a turn; any other message (system
 * messages, tool calls, tool results) never counts.
 */
export function chatTranscript<Message extends { role: string }>(
  messages: readonly Message[] | undefined,
  spec: ChatTranscriptSpec<Message>,
): (TranscriptEntry | undefined)[] | undefined {
  const { authored, calls, answerRole = 'assistant' } = spec;
  return messages?.map((message): TranscriptEntry | undefined => {
    if (message.role === 'user') {
      const said = authored(message);
      return said.length > 0 ? { role: 'user', content: said } : undefined;
    }
    return message.role === answerRole && !calls(message) ? { role: 'answer' } : undefined;
  });
}
