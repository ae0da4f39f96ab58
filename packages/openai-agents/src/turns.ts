/**
 * Which user turn a request of the agent's model belongs to: from the whole conversation, the new
 * items after a `previousResponseId` / `conversationId`, or the calls its tool outputs answer (a
 * later step). The SDK's items are the Responses API's and a few of its own, read by the kit
 * (`responsesTurn`), as the `openai` client's adapter reads them.
 */
import type { Idempotency } from '@idempotent-tools/core';
import { createRequestTurns } from '@idempotent-tools/core/adapter-kit';

export { responsesTurn } from '@idempotent-tools/core/adapter-kit';

/**
 * The turns of the requests of this package's wrappers (see the kit's `createRequestTurns`). The
 * namespace is the one of `@idempotent-tools/openai/agents` 0.1.0, where these wrappers were: a
 * turn derived from the words, and so the key of an outcome stored by it, stays the same.
 */
export const requestTurns = (executor: Idempotency) =>
  createRequestTurns(executor, 'idempotent-tools/openai');
