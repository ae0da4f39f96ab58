import {
  deriveTurnId as deriveFromTranscript,
  type TranscriptEntry,
  type TurnSources,
} from '@idempotent-tools/core/adapter-kit';
import type { CallContext } from './types.js';

interface MessageLike {
  type?: unknown;
  role?: unknown;
  content?: unknown;
  tool_calls?: unknown;
  getType?: () => string;
}

const ROLES: Record<string, string> = { user: 'human', assistant: 'ai' };

/** The message type (`human`, `ai`, `tool`, `system`), also of `{ role, content }` objects. */
function kind(m: MessageLike): unknown {
  if (typeof m.getType === 'function') return m.getType();
  if (typeof m.type === 'string') return m.type;
  return typeof m.role === 'string' ? (ROLES[m.role] ?? m.role) : undefined;
}

/**
 * One message of the graph state as the turn derivation reads it: a human message is what the
 * user wrote (its content only: message ids, names and kwargs are left out, LangGraph gives an
 * id-less message a fresh random id on every invoke); an AI message without tool calls ends a
 * turn; system prompts, tool calls and tool results are left out.
 */
function entryOf(message: unknown): TranscriptEntry | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const m = message as MessageLike;
  const type = kind(m);
  if (type === 'human') return { role: 'user', content: m.content ?? null };
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls.length : 0;
  return type === 'ai' && calls === 0 ? { role: 'answer' } : undefined;
}

const idOf = (value: unknown) =>
  (typeof value === 'string' && value !== '') || typeof value === 'number'
    ? String(value)
    : undefined;

/**
 * The turn id the adapter derives for a conversation (`thread_id`) and its messages: which user
 * turn the last human message is and what the user wrote (`deriveTurnId` of the adapter kit).
 * @returns undefined when there is no human message
 */
export function deriveTurnId(input: {
  messages: readonly unknown[];
  threadId: string | number;
}): string | undefined {
  return deriveFromTranscript(String(input.threadId), input.messages.map(entryOf));
}

/** Where a call's turn comes from: `configurable.turn_id`, else `thread_id` + the state's messages. */
export const turnSources: TurnSources<CallContext> = {
  turn: ({ config }) => idOf(config.configurable?.turn_id),
  conversation: ({ config }) => idOf(config.configurable?.thread_id),
  transcript: ({ state }) =>
    Array.isArray(state?.messages) ? state.messages.map(entryOf) : undefined,
  howTo:
    'the thread id (agent.invoke(input, { configurable: { thread_id: chatId } })) or the conversationId option; outside a graph, the turn: tool.invoke(call, { configurable: { turn_id } }) or the turnId option',
};
