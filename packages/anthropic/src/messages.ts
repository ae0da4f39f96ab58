/** The user turns of a Messages API conversation, as the turn derivation reads them. */
import { chatTranscript, contentBlocks } from '@idempotent-tools/core/adapter-kit';

type Message = { role: string; content?: unknown };

/**
 * A `user` message with something the user wrote is a user turn: its `tool_result` blocks and
 * `cache_control` markers are not (a thread re-sends answered messages without their markers).
 */
export const transcriptOf = (messages: readonly Message[] | undefined) =>
  chatTranscript(messages, {
    authored: (message) =>
      contentBlocks(message.content)
        .filter((block) => block.type !== 'tool_result')
        .map(({ cache_control: _, ...block }) => block),
    calls: (message) => contentBlocks(message.content).some((block) => block.type === 'tool_use'),
  });
