/**
 * Histories of chat messages kept as runs (`readRuns`), in the shape OpenAI's Chat Completions
 * and LangChain's messages share: `content`, an assistant message's `tool_calls` (`{ id, name }`
 * or `{ id, function: { name } }`), a tool result's `tool_call_id`, `name` and `status`. The
 * adapter says only which role each message has; and which tools end a run, learnt from the
 * tools it sees.
 */
import type { RunMessageKind, RunReader } from './transcripts.js';

/** A chat message as `chatRunReader` reads it (any other field is not read). */
export type ChatMessage = Partial<
  Record<'content' | 'name' | 'status' | 'tool_call_id' | 'tool_calls', unknown>
>;

/** The tool calls of a chat message: their ids and tools' names (none when it has no calls). */
export function chatToolCalls(message: ChatMessage): Array<{ id?: unknown; name?: unknown }> {
  const calls = message.tool_calls;
  if (!Array.isArray(calls)) return [];
  return calls.map((c) =>
    c === null || typeof c !== 'object' ? {} : { id: c.id, name: c.name ?? c.function?.name },
  );
}

/**
 * A `RunReader` of chat messages. `roleOf` gives each message's role in the names providers
 * share: `user`; `system` and `developer` (a prompt); `tool` and `function` (a tool's result);
 * any other (`assistant`) the model's, its text or its tool calls; `null` leaves the message out
 * (one that deletes another). A value that is no object is left out.
 */
export function chatRunReader<M extends ChatMessage>(
  roleOf: (message: M) => string | null | undefined,
  endsRun?: (toolName: string) => boolean | undefined,
): RunReader<M> {
  return {
    kind(message): RunMessageKind | undefined {
      if (message === null || typeof message !== 'object') return undefined;
      const role = roleOf(message);
      if (role === null) return undefined;
      if (role === 'user') return 'user';
      if (role === 'system' || role === 'developer') return 'prompt';
      if (role === 'tool' || role === 'function') return 'result';
      return chatToolCalls(message).length > 0 ? 'calls' : 'text';
    },
    content: (message) => message.content ?? '',
    calls: chatToolCalls,
    result: (message) => ({
      callId: message.tool_call_id,
      name: message.name,
      error: message.status === 'error',
    }),
    endsRun,
  };
}

/** Which tools end a run, as learnt from the tools seen (see `createRunEnds`). */
export interface RunEnds {
  /** Learn one tool (an object with a string `name`; anything else is ignored). */
  learn(tool: unknown): void;
  /** `RunReader.endsRun`: undefined for a tool not seen, or seen both ways. */
  endsRun(toolName: string): boolean | undefined;
}

/**
 * The tools of an agent seen so far, and whether a successful result of each ends its run
 * (`ends`: LangChain's `returnDirect`), for an adapter that learns its agent's tools from the
 * calls it sees (a middleware) rather than at wrap time.
 */
export function createRunEnds(ends: (tool: object) => boolean): RunEnds {
  const seen = new Map<string, Set<boolean>>();
  return {
    learn(tool) {
      if (tool === null || typeof tool !== 'object') return;
      const { name } = tool as { name?: unknown };
      if (typeof name === 'string') seen.set(name, (seen.get(name) ?? new Set()).add(ends(tool)));
    },
    endsRun(toolName) {
      const direct = seen.get(toolName);
      return direct?.size === 1 ? direct.has(true) : undefined;
    },
  };
}
