/**
 * Which user turn an OpenAI request belongs to: from the whole conversation, the new items after
 * a `previous_response_id` / `conversation`, or the calls its tool outputs answer (a later step).
 * The Responses items are read by the kit (`responsesItemSource`, `responsesTurn`), as the Agents
 * SDK adapter reads them.
 */
import type { Idempotency } from '@idempotent-tools/core';
import { createRequestTurns, readTranscript, roleSource } from '@idempotent-tools/core/adapter-kit';

export {
  responsesItemSource as itemSource,
  responsesTurn,
} from '@idempotent-tools/core/adapter-kit';

/** Chat Completions messages: user content; anything from the model or a tool answers. */
export const chatTranscript = (messages: readonly Record<string, unknown>[]) =>
  readTranscript(messages, { from: (m) => roleSource(m.role), content: (m) => m.content });

/** The turns of the requests of this package's wrappers (see the kit's `createRequestTurns`). */
export const requestTurns = (executor: Idempotency) =>
  createRequestTurns(executor, 'idempotent-tools/openai');
