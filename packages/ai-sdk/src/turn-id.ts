import { InvalidInputError, turnIdFromMessages } from '@idempotent-tools/core';
import type { ModelMessage } from 'ai';

/** Binary content (images, files) as base64, so that different bytes give different turn ids. */
function binaryAsBase64(_key: string, value: unknown): unknown {
  if (value instanceof ArrayBuffer) return Buffer.from(value).toString('base64');
  if (ArrayBuffer.isView(value)) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
  }
  return value;
}

/**
 * The turn id of an AI SDK conversation: core's `turnIdFromMessages` over the model messages up to
 * and including the last user message (binary parts hashed by content). The tool loop appends
 * assistant and tool messages within a turn, so every step of one `generateText` / `streamText`
 * call, and a resumed run of the same conversation, get the same id; a new user message starts
 * a new turn.
 *
 * @returns `t_` + 43 base64url characters, or undefined when there is no user message
 * @throws InvalidInputError when the messages cannot be hashed (non-JSON content)
 */
export function turnIdFromModelMessages(messages: readonly ModelMessage[]): string | undefined {
  let plain: ModelMessage[];
  try {
    plain = JSON.parse(JSON.stringify(messages, binaryAsBase64) ?? '[]') as ModelMessage[];
    return turnIdFromMessages(plain, (message) => message.role === 'user');
  } catch (cause) {
    throw new InvalidInputError({
      field: 'turnId',
      cause,
      message: `The turn id could not be derived from the conversation (${cause instanceof Error ? cause.message : String(cause)}). Pass an explicit turnId.`,
    });
  }
}
