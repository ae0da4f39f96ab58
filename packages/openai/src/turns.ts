/**
 * Which user turn an OpenAI request belongs to, from what the request carries: the whole
 * conversation, or (Responses, Agents SDK) only the new items after a `previous_response_id` /
 * `conversation`, or only tool outputs (a later step of a turn).
 */
import { ConfigurationError } from '@idempotent-tools/core';
import type { TurnLinks } from '@idempotent-tools/core/adapter-kit';
import { deriveTurnId, readTranscript } from '@idempotent-tools/core/adapter-kit';

type Item = Record<string, unknown>;

/**
 * The turn of a request: `turn` (a turn id, from the response the turn chains from or a link),
 * `said` (what the conversation's user said, as the position and content of the turn: needs the
 * conversation identity), or `refuse` (why the turn cannot be known).
 */
export type Anchor = { turn: string } | { said: string } | { refuse: string };

/** Chat Completions messages: user content; anything from the model or a tool answers. */
export const chatTranscript = (messages: readonly Item[]) =>
  readTranscript(messages, {
    from: ({ role }) =>
      role === 'user'
        ? 'user'
        : role === 'system' || role === 'developer'
          ? 'prompt'
          : role === 'tool' || role === 'function'
            ? 'tool'
            : 'model',
    content: (m) => m.content,
  });

/**
 * Responses / Agents SDK input items: a user message (`{ role, content }` or a `type: 'message'`
 * item) is a user turn; an assistant message, a function call, its output, reasoning and every
 * other item from the model or a tool answer; item references are left out.
 */
const itemsTranscript = (items: readonly Item[]) =>
  readTranscript(items, {
    from: (i) => {
      if (i.type !== undefined && i.type !== 'message') {
        if (i.type === 'item_reference') return undefined;
        return String(i.type).endsWith('_output') || i.type === 'function_call_result'
          ? 'tool'
          : 'model';
      }
      return i.role === 'user'
        ? 'user'
        : i.role === 'system' || i.role === 'developer'
          ? 'prompt'
          : 'model';
    },
    content: (i) => i.content,
  });

/** A string input is one user message. */
export const inputItems = (input: unknown): Item[] =>
  typeof input === 'string' ? [{ role: 'user', content: input }] : ((input ?? []) as Item[]);

/** The call ids of the tool outputs in a request (`function_call_output` / SDK `function_call_result`). */
const answeredCalls = (items: readonly Item[]) =>
  items.flatMap((i) =>
    i.type === 'function_call_output' || i.type === 'function_call_result'
      ? [String(i.call_id ?? i.callId)]
      : [],
  );

export async function anchorOf(
  items: readonly Item[],
  chain: { previous?: unknown; conversation?: unknown },
  links: TurnLinks<Anchor>,
): Promise<Anchor> {
  const transcript = itemsTranscript(items);
  if (transcript?.some((entry) => entry.role === 'user')) {
    // A response id is followed by one user turn (a second request from it is a retry or a
    // regenerate): with the user's words it names the turn, in every conversation.
    if (typeof chain.previous === 'string' && chain.previous !== '') {
      return { turn: deriveTurnId(`response:${chain.previous}`, transcript) as string };
    }
    if (chain.conversation != null) {
      return {
        refuse:
          'the request adds a message to a Conversations API conversation, whose earlier turns it does not carry, so this turn cannot be told apart from an earlier one with the same words. Nothing ran. Pass turnId (your id of the user message) with the request that carries the user message; its later steps find it.',
      };
    }
    return { said: deriveTurnId('idempotent-tools/openai', transcript) as string };
  }
  const ids = answeredCalls(items);
  return (
    (await links.find(ids)) ?? {
      refuse:
        ids.length > 0
          ? 'the request holds only tool outputs (a later step of a turn) and the step that started the turn was not run through this store, so the turn is unknown. Nothing ran. Run every step of the turn through the same store (its first step links the turn to its calls), or pass turnId.'
          : 'the request has no user message, so the turn is unknown. Nothing ran. Pass turnId.',
    }
  );
}

/** The kit's error for a call whose anchor refuses: the anchor's reason, naming turnId. */
export function refusal(error: unknown, anchor: Anchor | undefined, caller: string): unknown {
  const unknownTurn =
    ConfigurationError.isInstance(error) && /cannot be told apart/.test(error.message);
  if (!unknownTurn || anchor === undefined || !('refuse' in anchor)) return error;
  return new ConfigurationError({ option: 'turnId', message: `${caller}: ${anchor.refuse}` });
}
