/**
 * Which user turn an OpenAI request belongs to: from the whole conversation, the new items after
 * a `previous_response_id` / `conversation`, or the calls its tool outputs answer (a later step).
 */
import type { MessageSource, TurnLinks } from '@idempotent-tools/core/adapter-kit';
import { deriveTurnId, readTranscript } from '@idempotent-tools/core/adapter-kit';

type Item = Record<string, unknown>;

/**
 * The turn of a request: `turn` (an id: from the response it chains from, or a link), `said` (the
 * user's words and their place, with the conversation identity), or `refuse` (why it is unknown).
 */
export type Anchor = { turn: string } | { said: string } | { refuse: string };

/** Who a message is from, by its role (Chat Completions messages, Responses message items). */
const byRole = (role: unknown): MessageSource =>
  role === 'user'
    ? 'user'
    : role === 'system' || role === 'developer'
      ? 'prompt'
      : role === 'tool' || role === 'function'
        ? 'tool'
        : 'model';

/** Chat Completions messages: user content; anything from the model or a tool answers. */
export const chatTranscript = (messages: readonly Item[]) =>
  readTranscript(messages, { from: (m) => byRole(m.role), content: (m) => m.content });

/** Responses item types that are configuration the app adds: a prompt. */
const PROMPT_ITEMS = new Set(['additional_tools', 'configuration_update', 'compaction_trigger']);

/**
 * Who a Responses / Agents SDK input item is from: a message by its role; an item reference
 * (`item_reference`, or neither type nor role) is not read; a call's output (`*_output`,
 * `*_result`, `mcp_approval_response`) is a tool's; any other item (a call, reasoning, a type not
 * known here) the model's, so the same words after it are a new turn. See item-types.test.ts.
 */
export function itemSource({ type, role }: Item): MessageSource | undefined {
  if (type === undefined || type === null || type === 'message') {
    return role !== undefined ? byRole(role) : type === 'message' ? 'model' : undefined;
  }
  const name = String(type);
  if (name === 'item_reference') return undefined;
  if (PROMPT_ITEMS.has(name)) return 'prompt';
  const answer = /_(output|result)$/.test(name) || name === 'mcp_approval_response';
  return answer ? 'tool' : 'model';
}

/** A string input is one user message. */
export const inputItems = (input: unknown): Item[] =>
  typeof input === 'string' ? [{ role: 'user', content: input }] : ((input ?? []) as Item[]);

const refuse = (reason: string): Anchor => ({ refuse: reason });

/** The turn of a Responses / Agents SDK request: its input items and what it chains from. */
export async function anchorOf(
  items: readonly Item[],
  chain: { previous?: unknown; conversation?: unknown },
  links: TurnLinks<Anchor>,
): Promise<Anchor> {
  const transcript = readTranscript(items, { from: itemSource, content: (i) => i.content });
  if (transcript?.some((entry) => entry.role === 'user')) {
    // A referenced item may be a user message (a turn to count) or an answer (after which the
    // same words are a new turn): not knowing which, the turn is not derived.
    if (items.some((item) => itemSource(item) === undefined)) {
      return refuse(
        "the request's input holds item references (items OpenAI stored, which the request does not carry: a user message or an answer), so its turns cannot be counted and this turn cannot be told apart from another with the same words. Nothing ran. Pass turnId (your id of the user message), or send the items themselves.",
      );
    }
    // A response id is followed by one user turn (a second request from it is a retry or a
    // regenerate): with the user's words it names the turn, in every conversation.
    if (typeof chain.previous === 'string' && chain.previous !== '') {
      return { turn: deriveTurnId(`response:${chain.previous}`, transcript) as string };
    }
    if (chain.conversation != null) {
      return refuse(
        'the request adds a message to a Conversations API conversation, whose earlier turns it does not carry, so this turn cannot be told apart from an earlier one with the same words. Nothing ran. Pass turnId (your id of the user message) with the request that carries the user message; its later steps find it.',
      );
    }
    return { said: deriveTurnId('idempotent-tools/openai', transcript) as string };
  }
  // The calls the tool outputs answer (`function_call_output`, the SDK's `function_call_result`).
  const outputs = items.filter((i) => /^function_call_(output|result)$/.test(String(i.type)));
  const ids = outputs.map((i) => String(i.call_id ?? i.callId));
  const linked = await links.find(ids);
  if (linked !== undefined) return linked;
  return refuse(
    ids.length > 0
      ? 'the request holds only tool outputs (a later step of a turn) and the step that started the turn was not run through this store, so the turn is unknown. Nothing ran. Run every step of the turn through the same store (its first step links the turn to its calls), or pass turnId.'
      : 'the request has no user message, so the turn is unknown. Nothing ran. Pass turnId.',
  );
}
