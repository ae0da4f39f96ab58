/**
 * Which user turn an OpenAI request belongs to, from what the request carries: the whole
 * conversation, or (Responses, Agents SDK) only the new items after a `previous_response_id` /
 * `conversation`, or only tool outputs (a later step of a turn).
 */
import type { MessageSource, TurnLinks } from '@idempotent-tools/core/adapter-kit';
import { deriveTurnId, readTranscript } from '@idempotent-tools/core/adapter-kit';
import type { ResponseInputItem } from 'openai/resources/responses/responses';

type Item = Record<string, unknown>;

/**
 * The turn of a request: `turn` (a turn id, from the response the turn chains from or a link),
 * `said` (what the conversation's user said, as the position and content of the turn: needs the
 * conversation identity), or `refuse` (why the turn cannot be known: the turn source's refusal).
 */
export type Anchor = { turn: string } | { said: string } | { refuse: string };

/** The reason of an anchor that refuses (`TurnSources.refusal`), else undefined. */
export const refusalOf = (anchor: Anchor | undefined): string | undefined =>
  anchor !== undefined && 'refuse' in anchor ? anchor.refuse : undefined;

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

/** Item types of the Agents SDK's own protocol that the Responses API does not have. */
type AgentsItemType =
  | 'function_call_result'
  | 'computer_call_result'
  | 'hosted_tool_call'
  | 'unknown';

/**
 * Who each item type of a Responses input (the `openai` package's `ResponseInputItem`, checked
 * at compile time: a type the package adds fails the typecheck until it is classified here) or
 * of the Agents SDK's protocol comes from. Messages go by their role. A call or anything else the
 * model produced (reasoning, hosted tool calls, MCP calls and approval requests, a compaction of
 * the turns before) is the model's; a call's output, and the app's answer to an MCP approval
 * request, a tool's; configuration the app adds is a prompt; an item reference is not read (it
 * names an item the request does not hold: `anchorOf` refuses a turn it would have to count).
 */
const ITEM_SOURCES: Record<
  Exclude<NonNullable<ResponseInputItem['type']>, 'message'> | AgentsItemType,
  MessageSource | undefined
> = {
  item_reference: undefined,
  reasoning: 'model',
  compaction: 'model',
  function_call: 'model',
  custom_tool_call: 'model',
  computer_call: 'model',
  file_search_call: 'model',
  web_search_call: 'model',
  code_interpreter_call: 'model',
  image_generation_call: 'model',
  local_shell_call: 'model',
  shell_call: 'model',
  apply_patch_call: 'model',
  tool_search_call: 'model',
  mcp_list_tools: 'model',
  mcp_approval_request: 'model',
  mcp_call: 'model',
  program: 'model',
  hosted_tool_call: 'model',
  function_call_output: 'tool',
  function_call_result: 'tool',
  custom_tool_call_output: 'tool',
  computer_call_output: 'tool',
  computer_call_result: 'tool',
  local_shell_call_output: 'tool',
  shell_call_output: 'tool',
  apply_patch_call_output: 'tool',
  tool_search_output: 'tool',
  program_output: 'tool',
  mcp_approval_response: 'tool',
  additional_tools: 'prompt',
  configuration_update: 'prompt',
  compaction_trigger: 'prompt',
  // The SDK's item for a provider item it does not know: it came out of the model's output.
  unknown: 'model',
};

/**
 * Who a Responses / Agents SDK input item is from (see `ITEM_SOURCES`). A message (`{ role,
 * content }`, or `type: 'message'`) goes by its role; an item with neither a type nor a role is
 * an item reference (`{ id }`). An item type this table does not know answers the turn before
 * it (the safe side: the same words after it are a new turn, never a replay).
 */
export function itemSource(item: Item): MessageSource | undefined {
  const { type, role } = item;
  if (type === undefined || type === null || type === 'message') {
    if (role === undefined) return type === 'message' ? 'model' : undefined;
    return role === 'user'
      ? 'user'
      : role === 'system' || role === 'developer'
        ? 'prompt'
        : 'model';
  }
  return Object.hasOwn(ITEM_SOURCES, type as string)
    ? ITEM_SOURCES[type as keyof typeof ITEM_SOURCES]
    : 'model';
}

/** Responses / Agents SDK input items: user messages are turns; the rest as `itemSource` says. */
const itemsTranscript = (items: readonly Item[]) =>
  readTranscript(items, { from: itemSource, content: (i) => i.content });

/** An item reference (`{ type: 'item_reference', id }`, or `{ id }` alone). */
const isReference = (item: Item) =>
  item.type === 'item_reference' ||
  ((item.type === undefined || item.type === null) && item.role === undefined);

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
    // A referenced item may be a user message (a turn to count) or an answer (after which the
    // same words are a new turn): not knowing which, the turn is not derived.
    if (items.some(isReference)) {
      return {
        refuse:
          "the request's input holds item references (items OpenAI stored, which the request does not carry: a user message or an answer), so its turns cannot be counted and this turn cannot be told apart from another with the same words. Nothing ran. Pass turnId (your id of the user message), or send the items themselves.",
      };
    }
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
  const linked = await links.find(ids);
  if (linked !== undefined) return linked;
  return {
    refuse:
      ids.length > 0
        ? 'the request holds only tool outputs (a later step of a turn) and the step that started the turn was not run through this store, so the turn is unknown. Nothing ran. Run every step of the turn through the same store (its first step links the turn to its calls), or pass turnId.'
        : 'the request has no user message, so the turn is unknown. Nothing ran. Pass turnId.',
  };
}
