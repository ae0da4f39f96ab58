/**
 * The OpenAI Responses API's input items (and the Agents SDK's, which are the same plus a few of
 * its own) as the turn derivation reads them: who each item is from, and a request's turn from
 * its items and what it chains from. For the adapters of the `openai` client and of
 * `@openai/agents`; responses-items.test.ts places every item type of the `openai` package.
 */
import type { RequestTurn } from './request-turns.js';
import { type MessageSource, readTranscript, roleSource } from './transcripts.js';

type Item = Record<string, unknown>;

/** Responses item types that are configuration the app adds: a prompt. */
const PROMPT_ITEMS = new Set(['additional_tools', 'configuration_update', 'compaction_trigger']);

/**
 * Who a Responses / Agents SDK input item is from: a message by its role; an item reference
 * (`item_reference`, or neither type nor role) is not read; a call's output (`*_output`,
 * `*_result`, `mcp_approval_response`) is a tool's; any other item (a call, reasoning, a type not
 * known here) the model's, so the same words after it are a new turn. See responses-items.test.ts.
 */
export function responsesItemSource({ type, role }: Item): MessageSource | undefined {
  if (type === undefined || type === null || type === 'message') {
    return role !== undefined ? roleSource(role) : type === 'message' ? 'model' : undefined;
  }
  const name = String(type);
  if (name === 'item_reference') return undefined;
  if (PROMPT_ITEMS.has(name)) return 'prompt';
  const answer = /_(output|result)$/.test(name) || name === 'mcp_approval_response';
  return answer ? 'tool' : 'model';
}

/**
 * A Responses / Agents SDK request as the kit reads its turn: its input items (a string is one
 * user message) and what it chains from (`previous_response_id`, a `conversation`).
 */
export function responsesTurn(
  input: unknown,
  chain: { previous?: unknown; conversation?: unknown },
): RequestTurn {
  const items = typeof input === 'string' ? [{ role: 'user', content: input }] : (input ?? []);
  const all = items as Item[];
  // The calls the tool outputs answer (`function_call_output`, the SDK's `function_call_result`).
  const outputs = all.filter((i) => /^function_call_(output|result)$/.test(String(i.type)));
  return {
    transcript: readTranscript(all, { from: responsesItemSource, content: (i) => i.content }),
    // A referenced item may be a user message (a turn to count) or an answer (after which the
    // same words are a new turn): not knowing which, the turn is not derived.
    hidden: all.some((item) => responsesItemSource(item) === undefined)
      ? "the request's input holds item references (items OpenAI stored, which the request does not carry: a user message or an answer), so its turns cannot be counted and this turn cannot be told apart from another with the same words. Nothing ran. Pass turnId (your id of the user message), or send the items themselves."
      : undefined,
    continues: typeof chain.previous === 'string' ? chain.previous : undefined,
    serverHistory:
      chain.conversation != null
        ? 'the request adds a message to a Conversations API conversation, whose earlier turns it does not carry, so this turn cannot be told apart from an earlier one with the same words. Nothing ran. Pass turnId (your id of the user message) with the request that carries the user message; its later steps find it.'
        : undefined,
    answers: outputs.map((i) => String(i.call_id ?? i.callId)),
  };
}
