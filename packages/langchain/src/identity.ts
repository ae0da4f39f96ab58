import {
  deriveTurnId as deriveFromTranscript,
  readTranscript,
  type TurnSources,
} from '@idempotent-tools/core/adapter-kit';
import type { CallContext } from './types.js';

interface MessageLike {
  type?: unknown;
  role?: unknown;
  content?: unknown;
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
 * The messages of the graph state as the turn derivation reads them: a human message is what the
 * user wrote (its content only: message ids, names and kwargs are left out, LangGraph gives an
 * id-less message a fresh random id on every invoke); AI messages and tool results answer;
 * system prompts never count.
 */
const transcriptOf = (messages: readonly unknown[]) =>
  readTranscript(messages, {
    from: (message) => {
      if (message === null || typeof message !== 'object') return undefined;
      const type = kind(message as MessageLike);
      if (type === 'human') return 'user';
      if (type === 'system' || type === 'developer') return 'prompt';
      if (type === 'remove') return undefined; // a RemoveMessage deletes, it says nothing
      return type === 'tool' || type === 'function' ? 'tool' : 'model';
    },
    content: (message) => (message as MessageLike).content ?? '',
  });

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
  return deriveFromTranscript(String(input.threadId), transcriptOf(input.messages) ?? []);
}

/** Where a call's turn comes from: `configurable.turn_id`, else `thread_id` + the state's messages. */
export const turnSources: TurnSources<CallContext> = {
  turn: ({ config }) => idOf(config.configurable?.turn_id),
  conversation: ({ config }) => idOf(config.configurable?.thread_id),
  transcript: ({ state }) =>
    Array.isArray(state?.messages) ? transcriptOf(state.messages) : undefined,
  howTo:
    'the thread id (agent.invoke(input, { configurable: { thread_id: chatId } })) or the conversationId option; outside a graph, the turn: tool.invoke(call, { configurable: { turn_id } }) or the turnId option',
};
