/** A call's turn: `configurable`, or the graph state's messages read as the kit's runs. */
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { CallContext } from './types.js';

type MessageLike = kit.ChatMessage & { type?: unknown; role?: unknown; getType?: () => string };

/** LangChain's message types (and `{ role, content }` objects' roles) as the kit's role names. */
const ROLES: Record<string, string> = { human: 'user', ai: 'assistant' };

/** LangChain messages as the kit's `readRuns` reads them (a `RemoveMessage` says nothing). */
const reader = (endsRun?: (toolName: string) => boolean | undefined) =>
  kit.chatRunReader<MessageLike>((m) => {
    const type =
      typeof m.getType === 'function' ? m.getType() : typeof m.type === 'string' ? m.type : m.role;
    if (typeof type !== 'string') return undefined;
    return type === 'remove' ? null : (ROLES[type] ?? type);
  }, endsRun);

/**
 * The tools of an agent seen so far: whether a successful result of one ends a `createAgent`
 * run (`returnDirect`).
 */
export const toolsSeen = () =>
  kit.createRunEnds((tool) => (tool as { returnDirect?: unknown }).returnDirect === true);

/**
 * The turn id the adapter derives for a conversation (`thread_id`) and its messages: which user
 * turn the last human message is and what the user wrote. Pass `tools` (the agent's tools) for a
 * `createAgent` thread: a run that ended with a tool result is then told from a broken one by the
 * tool's `returnDirect`; without them, a human message repeating the words of a turn that ended
 * with a tool call or result is refused (a `ConfigurationError`: pass a turn id of your own).
 * @returns undefined when there is no human message
 */
export function deriveTurnId(input: {
  messages: readonly unknown[];
  threadId: string | number;
  tools?: ReadonlyArray<{ name: string; returnDirect?: boolean }> | undefined;
}): string | undefined {
  const tools = toolsSeen();
  for (const tool of input.tools ?? []) tools.learn(tool);
  const runs = reader(input.tools === undefined ? undefined : tools.endsRun);
  return kit.deriveTurnId(
    String(input.threadId),
    kit.readRuns(input.messages as MessageLike[], runs) ?? [],
  );
}

/**
 * Where a call's turn comes from: `configurable.turn_id`, else `thread_id` + the state's
 * messages. `endsRun`: the run is a `createAgent`'s whose tools the adapter knows (the
 * middleware); none for tools wrapped on their own (the graph may be any graph).
 */
export const turnSourcesOf = (
  endsRun?: (name: string) => boolean | undefined,
): kit.TurnSources<CallContext> => ({
  turn: ({ config }) => kit.idOf(config.configurable?.turn_id),
  conversation: ({ config }) => kit.idOf(config.configurable?.thread_id),
  transcript: ({ state }) =>
    Array.isArray(state?.messages) ? kit.readRuns(state.messages, reader(endsRun)) : undefined,
  howTo:
    'the thread id (agent.invoke(input, { configurable: { thread_id: chatId } })) or the conversationId option; outside a graph, the turn: tool.invoke(call, { configurable: { turn_id } }) or the turnId option',
});
