import {
  deriveTurnId as deriveFromTranscript,
  type MessageSource,
  readTranscript,
  type TurnSources,
} from '@idempotent-tools/core/adapter-kit';
import type { CallContext } from './types.js';

interface MessageLike {
  type?: unknown;
  role?: unknown;
  content?: unknown;
  name?: unknown;
  status?: unknown;
  tool_call_id?: unknown;
  tool_calls?: unknown;
  getType?: () => string;
}

const ROLES: Record<string, string> = { user: 'human', assistant: 'ai' };

/** The message type (`human`, `ai`, `tool`, `system`), also of `{ role, content }` objects. */
function typeOf(m: MessageLike): unknown {
  if (typeof m.getType === 'function') return m.getType();
  if (typeof m.type === 'string') return m.type;
  return typeof m.role === 'string' ? (ROLES[m.role] ?? m.role) : undefined;
}

/** The tool calls of an AI message (LangChain's `{ id, name }`, OpenAI's `{ id, function }`). */
function callsOf(m: MessageLike): Array<{ id?: unknown; name?: unknown }> {
  if (!Array.isArray(m.tool_calls)) return [];
  return m.tool_calls.map(
    (call: { id?: unknown; name?: unknown; function?: { name?: unknown } }) =>
      call === null || typeof call !== 'object'
        ? {}
        : { id: call.id, name: call.name ?? call.function?.name },
  );
}

/** What a message is: a user's, a prompt, model text, model tool calls, a tool's result. */
type Kind = 'user' | 'prompt' | 'text' | 'calls' | 'result';

function kindOf(message: unknown): Kind | undefined {
  if (message === null || typeof message !== 'object') return undefined;
  const m = message as MessageLike;
  const type = typeOf(m);
  if (type === 'human') return 'user';
  if (type === 'system' || type === 'developer') return 'prompt';
  if (type === 'remove') return undefined; // a RemoveMessage deletes, it says nothing
  if (type === 'tool' || type === 'function') return 'result';
  return callsOf(m).length > 0 ? 'calls' : 'text';
}

/**
 * Whether a tool's result ends a `createAgent` run (`returnDirect`), by the tool's name:
 * undefined when the tool is not known.
 */
export type ReturnsDirect = (toolName: string) => boolean | undefined;

/**
 * Who each message of one run is from. A run is the messages after a user message, up to the
 * next one. In a `createAgent` run (`returnsDirect` given), the run answered the user's message
 * when it ends with the model's text, or with the successful result of a `returnDirect` tool
 * (the agent stops there); a run that ends with tool calls, or with the result of any other tool,
 * broke before the model answered (it would have been called next) and answers nothing: the
 * user's message sent again is the same turn. A result of a tool the adapter does not know, and
 * every run that does not end with the model's text outside a `createAgent` (a graph of your own
 * may end after its tool node), may be either: `partial` (a repeat of the same words is refused).
 */
function sourcesOfRun(run: readonly unknown[], returnsDirect: ReturnsDirect | undefined) {
  const kinds = run.map(kindOf);
  const last = kinds.findLast((kind) => kind === 'text' || kind === 'calls' || kind === 'result');
  let answered: 'yes' | 'no' | 'unsure' = 'yes';
  if (last !== undefined && last !== 'text') {
    answered = returnsDirect === undefined ? 'unsure' : endedByTool(run, kinds, returnsDirect);
  }
  return kinds.map((kind): MessageSource | undefined => {
    if (kind === undefined || kind === 'prompt') return kind;
    if (kind === 'user') return 'user';
    if (answered === 'yes') return kind === 'result' ? 'tool' : 'model';
    return answered === 'unsure' ? 'partial' : undefined;
  });
}

/** A createAgent run ending with tool calls or results: did a `returnDirect` tool end it? */
function endedByTool(
  run: readonly unknown[],
  kinds: ReadonlyArray<Kind | undefined>,
  returnsDirect: ReturnsDirect,
): 'yes' | 'no' | 'unsure' {
  const names = new Map<unknown, unknown>();
  for (const [i, message] of run.entries()) {
    if (kinds[i] !== 'calls') continue;
    for (const call of callsOf(message as MessageLike)) names.set(call.id, call.name);
  }
  const lastCalls = kinds.lastIndexOf('calls');
  let answered: 'yes' | 'no' | 'unsure' = 'no';
  for (const [i, message] of run.entries()) {
    if (i < lastCalls || kinds[i] !== 'result') continue;
    const m = message as MessageLike;
    if (m.status === 'error') continue; // the agent hands an error back to the model
    const name = m.name ?? names.get(m.tool_call_id);
    const direct = typeof name === 'string' ? returnsDirect(name) : undefined;
    if (direct === true) return 'yes';
    if (direct === undefined) answered = 'unsure';
  }
  return answered;
}

/**
 * The messages of the graph state as the turn derivation reads them: a human message is what the
 * user wrote (its content only: message ids, names and kwargs are left out, LangGraph gives an
 * id-less message a fresh random id on every invoke); what came after it answers it as
 * `sourcesOfRun` says; system prompts never count.
 */
function transcriptOf(messages: readonly unknown[], returnsDirect: ReturnsDirect | undefined) {
  const sources: Array<MessageSource | undefined> = [];
  let start = 0;
  for (let i = 0; i <= messages.length; i++) {
    if (i < messages.length && kindOf(messages[i]) !== 'user') continue;
    sources.push(...sourcesOfRun(messages.slice(start, i), returnsDirect));
    if (i < messages.length) sources.push('user');
    start = i + 1;
  }
  return readTranscript(
    messages.map((message, i) => ({ message, from: sources[i] })),
    {
      from: (entry) => entry.from,
      content: (entry) => (entry.message as MessageLike).content ?? '',
    },
  );
}

const idOf = (value: unknown) =>
  (typeof value === 'string' && value !== '') || typeof value === 'number'
    ? String(value)
    : undefined;

/**
 * The turn id the adapter derives for a conversation (`thread_id`) and its messages: which user
 * turn the last human message is and what the user wrote (`deriveTurnId` of the adapter kit).
 * Pass `tools` (the agent's tools) when the messages are a `createAgent` thread's: a run that
 * ended with a tool result is then told from a broken one by the tool's `returnDirect`; without
 * them, a human message repeating the words of a turn that ended with a tool call or result is
 * refused (a `ConfigurationError`: pass a turn id of your own).
 * @returns undefined when there is no human message
 */
export function deriveTurnId(input: {
  messages: readonly unknown[];
  threadId: string | number;
  tools?: ReadonlyArray<{ name: string; returnDirect?: boolean }> | undefined;
}): string | undefined {
  const { tools } = input;
  const returnsDirect: ReturnsDirect | undefined =
    tools === undefined
      ? undefined
      : (name) => {
          const found = tools.filter((tool) => tool.name === name);
          const direct = new Set(found.map((tool) => tool.returnDirect === true));
          return direct.size === 1 ? direct.has(true) : undefined;
        };
  return deriveFromTranscript(
    String(input.threadId),
    transcriptOf(input.messages, returnsDirect) ?? [],
  );
}

/**
 * Where a call's turn comes from: `configurable.turn_id`, else `thread_id` + the state's
 * messages. `returnsDirect`: the run is a `createAgent`'s whose tools the adapter knows (the
 * middleware); undefined for tools wrapped on their own (the graph may be any graph).
 */
export function turnSourcesOf(returnsDirect?: ReturnsDirect): TurnSources<CallContext> {
  return {
    turn: ({ config }) => idOf(config.configurable?.turn_id),
    conversation: ({ config }) => idOf(config.configurable?.thread_id),
    transcript: ({ state }) =>
      Array.isArray(state?.messages) ? transcriptOf(state.messages, returnsDirect) : undefined,
    howTo:
      'the thread id (agent.invoke(input, { configurable: { thread_id: chatId } })) or the conversationId option; outside a graph, the turn: tool.invoke(call, { configurable: { turn_id } }) or the turnId option',
  };
}
