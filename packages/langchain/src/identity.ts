/** A call's turn: `configurable`, or the graph state's messages read as the kit's runs. */
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { CallContext } from './types.js';

type MessageLike = Partial<Record<'type' | 'role' | 'content' | 'name' | 'status', unknown>> & {
  tool_call_id?: unknown;
  tool_calls?: unknown;
  getType?: () => string;
};

const ROLES: Record<string, string> = { user: 'human', assistant: 'ai' };

/** The tool calls of an AI message (LangChain's `{ id, name }`, OpenAI's `{ id, function }`). */
const callsOf = (m: MessageLike): Array<{ id?: unknown; name?: unknown }> =>
  Array.isArray(m.tool_calls)
    ? m.tool_calls.map((c) =>
        c === null || typeof c !== 'object' ? {} : { id: c.id, name: c.name ?? c.function?.name },
      )
    : [];

/** LangChain messages (and `{ role, content }` objects), as the kit's `readRuns` reads them. */
const reader = (
  endsRun?: (toolName: string) => boolean | undefined,
): kit.RunReader<MessageLike> => ({
  kind(m) {
    if (m === null || typeof m !== 'object') return undefined;
    const role = typeof m.role === 'string' ? (ROLES[m.role] ?? m.role) : undefined;
    const type =
      typeof m.getType === 'function' ? m.getType() : typeof m.type === 'string' ? m.type : role;
    if (type === 'human') return 'user';
    if (type === 'system' || type === 'developer') return 'prompt';
    if (type === 'remove') return undefined; // a RemoveMessage deletes, it says nothing
    if (type === 'tool' || type === 'function') return 'result';
    return callsOf(m).length > 0 ? 'calls' : 'text';
  },
  content: (m) => m.content ?? '',
  calls: callsOf,
  result: (m) => ({ callId: m.tool_call_id, name: m.name, error: m.status === 'error' }),
  endsRun,
});

/**
 * The tools of an agent seen so far: whether a successful result of one ends a `createAgent`
 * run (`returnDirect`); undefined for a tool not seen, or seen both ways.
 */
export function toolsSeen() {
  const seen = new Map<string, Set<boolean>>();
  return {
    learn(tool: unknown) {
      const { name, returnDirect } = (tool ?? {}) as { name?: unknown; returnDirect?: unknown };
      if (typeof name === 'string')
        seen.set(name, (seen.get(name) ?? new Set()).add(returnDirect === true));
    },
    endsRun: (name: string) => {
      const direct = seen.get(name);
      return direct?.size === 1 ? direct.has(true) : undefined;
    },
  };
}

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
