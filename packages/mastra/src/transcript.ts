/**
 * The turn derivation's reading of a Mastra run's messages (docs/design.md, "Turn identity"):
 * the memory thread's stored messages and the run's input, who each is from, and whether a
 * stored assistant message is the record of a finished run, a failed one, or one that cannot be
 * told (see the README's "What answers a turn").
 */
import { type MessageSource, readTranscript } from '@idempotent-tools/core/adapter-kit';
import type { MastraMessageContentV2 } from '@mastra/core/agent/message-list';

/** A message's content as Mastra stores it, its metadata as the reader looks at it. */
type StoredContent = Partial<MastraMessageContentV2> & {
  metadata?: { pendingToolApprovals?: object; suspendedTools?: object };
};

/**
 * Who an assistant message Mastra's memory stored is from (format 2: `content.parts`), row by
 * row of the README's table "What answers a turn": undefined for a failed run's (an `error`
 * part), `partial` for one that cannot be told (an empty last step, a call with no outcome that
 * waits for nothing, a tool's result with observational memory), else `model` (an answer).
 */
function storedFrom(content: StoredContent, savesEarly: boolean): MessageSource | undefined {
  const parts = Array.isArray(content.parts) ? content.parts : [];
  if (parts.some((part) => part?.type === 'error')) return undefined;
  const last = parts.at(-1);
  if (last?.type === 'step-start') return 'partial';
  const waiting = {
    ...content.metadata?.pendingToolApprovals,
    ...content.metadata?.suspendedTools,
  };
  const unfinished = parts.some((part) => {
    const call = part?.type === 'tool-invocation' ? part.toolInvocation : undefined;
    return (
      (call?.state === 'call' || call?.state === 'partial-call') &&
      !Object.hasOwn(waiting, String(call.toolCallId))
    );
  });
  if (unfinished) return 'partial';
  return savesEarly && last?.type === 'tool-invocation' ? 'partial' : 'model';
}

/**
 * The messages of a run (the stored messages of the memory thread, then the model messages of
 * the input) as the turn derivation reads them: a user message is its parts (stored messages hold
 * them as `{ parts }`); a stored assistant message answers as `storedFrom` says, a posted one
 * (the run's input) and tool results answer; system messages and signals never count.
 */
export const transcriptOf = (messages: readonly unknown[], savesEarly: boolean) =>
  readTranscript(messages, {
    from: (message) => {
      const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
      if (role === 'user') return 'user';
      if (role === 'system' || role === 'signal') return 'prompt';
      if (role === 'tool') return 'tool';
      const stored = content as StoredContent | undefined;
      return stored?.format === 2 ? storedFrom(stored, savesEarly) : 'model';
    },
    content: (message) => (message as { content?: unknown }).content,
  });

/**
 * Whether the call's memory saves messages before a run ends (observational memory saves them
 * as it goes), so that a run killed after a tool step leaves a record that looks finished.
 */
export function savesEarly(context: { memory?: unknown; requestContext?: unknown }): boolean {
  const configured = (
    context.memory as { getConfig?: () => { observationalMemory?: unknown } }
  )?.getConfig?.()?.observationalMemory;
  const requestContext = context.requestContext as { get?: (key: string) => unknown } | undefined;
  const run = (
    requestContext?.get?.('MastraMemory') as { memoryConfig?: { observationalMemory?: unknown } }
  )?.memoryConfig?.observationalMemory;
  const on = (value: unknown) =>
    value === true ||
    (typeof value === 'object' &&
      value !== null &&
      (value as { enabled?: unknown }).enabled !== false);
  return on(run ?? configured);
}
