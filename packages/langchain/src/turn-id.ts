import { fingerprint, turnIdFromMessages } from '@idempotent-tools/core';

/** Longest turn id core accepts; longer derived ids are hashed. */
const MAX_TURN_ID = 512;

interface MessageLike {
  id?: unknown;
  type?: unknown;
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: unknown;
  getType?: () => string;
}

const ROLES: Record<string, string> = { user: 'human', assistant: 'ai', developer: 'system' };

/** The message type (`human`, `ai`, `tool`, `system`), also of `{ role, content }` objects. */
function kind(message: unknown): string | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const m = message as MessageLike;
  if (typeof m.getType === 'function') return m.getType();
  if (typeof m.type === 'string') return m.type;
  return typeof m.role === 'string' ? (ROLES[m.role] ?? m.role) : undefined;
}

const isHuman = (message: unknown) => kind(message) === 'human';

/** What identifies a message when it has no id: its type, content and tool calls. */
function slim(message: unknown): unknown {
  const m = (message ?? {}) as MessageLike;
  return {
    type: kind(message) ?? null,
    content: m.content ?? null,
    ...(Array.isArray(m.tool_calls) && m.tool_calls.length > 0 ? { tool_calls: m.tool_calls } : {}),
    ...(typeof m.tool_call_id === 'string' ? { tool_call_id: m.tool_call_id } : {}),
  };
}

/**
 * The turn id of a LangChain / LangGraph conversation: the thread id and the id of the last
 * human message, as the JSON text `["<thread id>","<message id>"]` (`null` without a thread).
 * A last human message without an id is identified by a hash of the conversation up to it
 * (`turnIdFromMessages` of core). Ids longer than 512 characters are hashed (`t_...`).
 *
 * @returns undefined when there is no human message
 */
export function deriveTurnId(input: {
  messages: readonly unknown[] | undefined;
  threadId?: string | number | undefined;
}): string | undefined {
  const messages = input.messages;
  if (!Array.isArray(messages)) return undefined;
  const last = messages.findLast(isHuman) as MessageLike | undefined;
  if (last === undefined) return undefined;
  const turn =
    typeof last.id === 'string' && last.id !== ''
      ? last.id
      : turnIdFromMessages(messages.map(slim), isHuman);
  const id = JSON.stringify([input.threadId ?? null, turn]);
  return id.length <= MAX_TURN_ID ? id : `t_${fingerprint(id)}`;
}
