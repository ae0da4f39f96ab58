/**
 * A conversation as the turn derivation reads it (docs/design.md, "Turn identity"). One rule for
 * every framework: a user message is a user turn with what the user wrote in it; anything from
 * the model or a tool after it (assistant text, a tool call, a tool result) **answers** it; system
 * and developer prompts are neither. Adapters only say who each message is from and where its
 * content is (`TranscriptReader`); what counts as the content is `userContent`'s.
 */
import type { TranscriptEntry } from './turn-identity.js';

/**
 * Who a message of a conversation is from. `partial`: from the model or a tool, in a history that
 * also keeps what a broken run stored before it failed (a checkpointer, a memory), when the
 * adapter cannot tell whether the run answered: an answer, unless the next user message repeats
 * the words of the turn before (then the derivation refuses, naming `turnId`).
 */
export type MessageSource = 'user' | 'model' | 'tool' | 'partial' | 'prompt';

/**
 * Who a message is from by its role, in the role names most providers share (OpenAI's Chat
 * Completions and Responses, Anthropic, the AI SDK): `user`; `system` and `developer` are a
 * prompt; `tool` and `function` a tool's result; any other (`assistant`, a role not known here)
 * the model's, so the same words after it are a new turn.
 */
export const roleSource = (role: unknown): MessageSource =>
  role === 'user'
    ? 'user'
    : role === 'system' || role === 'developer'
      ? 'prompt'
      : role === 'tool' || role === 'function'
        ? 'tool'
        : 'model';

/** How an adapter reads the messages of its framework. */
export interface TranscriptReader<Message> {
  /**
   * Who the message is from: `user` (the user wrote it), `model` (assistant text, tool calls,
   * reasoning), `tool` (a tool's result), `prompt` (system and developer messages: never a turn,
   * never an answer); undefined leaves the message out (a reference to another message).
   */
  from(message: Message): MessageSource | undefined;
  /** The content of a user message, as the framework holds it (a string, parts, `{ parts }`). */
  content(message: Message): unknown;
  /**
   * Whether a part of a user message is a tool's result (Anthropic's `tool_result` blocks,
   * Gemini's `functionResponse` parts): it answers the turn before it and is not what the user
   * wrote. @default never
   */
  isToolResult?(part: unknown): boolean;
}

/** A message's content as parts: a string is one part, a holder `{ parts }` its parts. */
function partsOf(content: unknown): unknown[] | undefined {
  if (Array.isArray(content)) return content;
  const parts = (content as { parts?: unknown } | null | undefined)?.parts;
  return Array.isArray(parts) ? parts : undefined;
}

/**
 * The transcript of a conversation's messages (undefined for no messages): user turns with
 * their content, and an answer for everything from the model or a tool.
 */
export function readTranscript<Message>(
  messages: Iterable<Message> | undefined,
  reader: TranscriptReader<Message>,
): TranscriptEntry[] | undefined {
  if (messages === undefined) return undefined;
  const entries: TranscriptEntry[] = [];
  for (const message of messages) {
    const from = reader.from(message);
    if (from === undefined || from === 'prompt') continue;
    if (from !== 'user') {
      entries.push(from === 'partial' ? { role: 'answer', partial: true } : { role: 'answer' });
      continue;
    }
    const content = reader.content(message);
    const parts = partsOf(content);
    if (parts === undefined) {
      entries.push({ role: 'user', content });
      continue;
    }
    const isToolResult = reader.isToolResult;
    const said = isToolResult === undefined ? parts : parts.filter((part) => !isToolResult(part));
    // Tool results come first in a user message (Anthropic requires it): they answer the turn
    // before; the rest, if any, is a new user turn.
    if (said.length < parts.length) entries.push({ role: 'answer' });
    if (said.length > 0) entries.push({ role: 'user', content: said });
  }
  return entries;
}

/** What one message of a history kept as runs is (`readRuns`). */
export type RunMessageKind = 'user' | 'prompt' | 'text' | 'calls' | 'result';

/** How an adapter reads a history kept as runs (a LangGraph thread's messages). */
export interface RunReader<Message> {
  /**
   * What the message is: the user's, a prompt (system, developer), the model's text, the model's
   * tool calls, a tool's result; undefined leaves it out (a message that deletes another).
   */
  kind(message: Message): RunMessageKind | undefined;
  /** The content of a user message, as the framework holds it. */
  content(message: Message): unknown;
  /** The tool calls of a `calls` message: their ids and tools' names. */
  calls(message: Message): ReadonlyArray<{ id?: unknown; name?: unknown }>;
  /** A `result` message: the id of the call it answers, its tool's name if it says, an error or not. */
  result(message: Message): { callId?: unknown; name?: unknown; error: boolean };
  /**
   * Whether a successful result of the tool ends the run (the framework answers with it, as
   * LangChain's `returnDirect`); undefined when the tool is not known. Without it, a run that does
   * not end with the model's text cannot be told from a broken one (see `readRuns`). @default none
   */
  endsRun?: ((toolName: string) => boolean | undefined) | undefined;
}

/**
 * The transcript of a history kept as runs, which may keep what a broken run stored (a run: the
 * messages after a user message, up to the next one). A run answered its user message when it
 * ends with the model's text, or with the successful result of a tool that ends runs
 * (`endsRun`); a run that ends with tool calls, or with other tools' results, broke before the
 * model answered (it would have been called next): it answers nothing, so the user's message sent
 * again is the same turn. A run that may be either (no `endsRun`, a tool it does not know) is
 * `partial`: a repeat of the same words after it is refused.
 */
export function readRuns<Message>(
  messages: readonly Message[],
  reader: RunReader<Message>,
): TranscriptEntry[] | undefined {
  const kinds = messages.map((message) => reader.kind(message));
  const from: Array<MessageSource | undefined> = [];
  let start = 0;
  for (let i = 0; i <= messages.length; i++) {
    if (i < messages.length && kinds[i] !== 'user') continue;
    const run = kinds.slice(start, i);
    const answered = runAnswered(messages.slice(start, i), run, reader);
    for (const kind of run) {
      if (kind === undefined || kind === 'prompt' || kind === 'user') from.push(kind);
      else if (answered === 'yes') from.push(kind === 'result' ? 'tool' : 'model');
      else from.push(answered === 'unsure' ? 'partial' : undefined);
    }
    if (i < messages.length) from.push('user');
    start = i + 1;
  }
  return readTranscript(
    messages.map((message, i) => ({ message, from: from[i] })),
    { from: (entry) => entry.from, content: (entry) => reader.content(entry.message) },
  );
}

/** Whether one run (`readRuns`) answered its user message. */
function runAnswered<Message>(
  run: readonly Message[],
  kinds: ReadonlyArray<RunMessageKind | undefined>,
  reader: RunReader<Message>,
): 'yes' | 'no' | 'unsure' {
  const last = kinds.findLast((kind) => kind === 'text' || kind === 'calls' || kind === 'result');
  if (last === undefined || last === 'text') return 'yes';
  const { endsRun } = reader;
  if (endsRun === undefined) return 'unsure';
  const names = new Map<unknown, unknown>();
  for (const [i, message] of run.entries()) {
    if (kinds[i] !== 'calls') continue;
    for (const call of reader.calls(message)) names.set(call.id, call.name);
  }
  const lastCalls = kinds.lastIndexOf('calls');
  let answered: 'no' | 'unsure' = 'no';
  for (const [i, message] of run.entries()) {
    if (i < lastCalls || kinds[i] !== 'result') continue;
    const result = reader.result(message);
    if (result.error) continue; // the framework hands an error back to the model
    const name = result.name ?? names.get(result.callId);
    const direct = typeof name === 'string' ? endsRun(name) : undefined;
    if (direct === true) return 'yes';
    if (direct === undefined) answered = 'unsure';
  }
  return answered;
}
