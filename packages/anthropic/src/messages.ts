/** The user turns of a Messages API conversation, as the turn derivation reads them. */
import { readTranscript } from '@idempotent-tools/core/adapter-kit';

type Message = { role: string; content?: unknown };

/**
 * A `user` message is what the user wrote (its `tool_result` blocks answer the turn before, and
 * `cache_control` markers never count); an `assistant` message answers, whatever it holds (text,
 * `tool_use`, thinking). A `system` message (the `system` parameter's text, a runner's
 * `tool_addition` / `tool_removal` blocks) is neither a turn nor an answer.
 */
export const transcriptOf = (messages: readonly Message[] | undefined) =>
  readTranscript(messages, {
    from: ({ role }) => (role === 'user' ? 'user' : role === 'system' ? 'prompt' : 'model'),
    content: (message) => message.content,
    isToolResult: (block) => (block as { type?: unknown } | null)?.type === 'tool_result',
  });
