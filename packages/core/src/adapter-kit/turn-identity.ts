/**
 * Turn identity (docs/design.md, "Turn identity"): which conversation turn a tool call belongs
 * to. Every adapter resolves it here, so the contract is implemented once:
 * - distinct: two conversations never share a turn id; two user turns of one conversation never
 *   share one, even with the same text;
 * - stable: a retry of a turn gets the same turn id, whatever volatile context was rebuilt
 *   (system / developer prompts, timestamps, retrieved context, per-attempt message ids).
 * Sources, in order: explicit (`turnId`), the framework's own identity of the turn, a turn derived
 * from the messages **only together with a conversation identity**. With none, a
 * `ConfigurationError` naming the option to set.
 */

import { ConfigurationError } from '../errors/index.js';
import { canonicalize, sha256 } from '../keys/canonicalize.js';
import { userContent } from './turn-content.js';

/** A value per call: fixed (wrap per request), or computed from the call (undefined: not known). */
export type PerCall<Info> = string | ((call: Info) => string | undefined);

/** The options every adapter takes to identify the turn of a call. */
export interface TurnIdentityOptions<Info> {
  /**
   * The turn: your id of the user turn (e.g. the id of the user message), unique across
   * conversations. A string (when you wrap per request) or a function of the call. Wins over
   * every other source. Never the provider's tool-call id: it is new on every retry.
   * @default undefined (the framework's identity, else derived with `conversationId`)
   */
  turnId?: PerCall<Info> | undefined;
  /**
   * The conversation: your chat, thread or session id, different for every conversation of every
   * user. With it the turn is derived from the conversation's user messages: which user turn it
   * is and what the user wrote (system prompts, tool messages and message ids are left out).
   * A string means every call through this wrapper is that one conversation: wrap per request.
   * @default undefined (the framework's own conversation identity, if it has one)
   */
  conversationId?: PerCall<Info> | undefined;
}

/**
 * One message of a conversation as the turn derivation reads it (made by `readTranscript`):
 * `user` for a message the user wrote (its content as the framework holds it: `userContent`
 * normalises it), `answer` for anything from the model or a tool (assistant text, a tool call,
 * a tool result). System and developer prompts are left out (`undefined`).
 */
export type TranscriptEntry =
  | { role: 'user'; content: unknown }
  | {
      role: 'answer';
      /**
       * The message may be the partial record of a run that broke before it answered (a tool
       * call or result a checkpointer or memory stored before the run failed): a user message
       * with the words of the turn before it, after only such messages, cannot be told from
       * the same turn sent again, and the derivation refuses. @default false
       */
      partial?: boolean;
    };

/** Where a resolved turn id came from. */
export type TurnSource = 'explicit' | 'framework' | 'derived';

export interface ResolvedTurn {
  turnId: string;
  source: TurnSource;
}

/** What an adapter knows about the framework's own identities. All optional. */
export interface TurnSources<Info> {
  /**
   * The framework's own identity of the turn: an id the app or the client put on the call
   * (AI SDK `toolsContext.turnId`, MCP `_meta`, a LangGraph `configurable.turn_id`). Used as it is.
   */
  turn?: (call: Info) => string | undefined;
  /** The framework's own identity of the conversation (a LangGraph `thread_id`, a chat id). */
  conversation?: (call: Info) => string | undefined;
  /** The conversation's messages up to the call, for a derived turn (see `readTranscript`). */
  transcript?: (call: Info) => Iterable<TranscriptEntry | undefined> | undefined;
  /**
   * Why the framework cannot tell this call's turn, when it knows (a request that carries only
   * tool outputs of a turn it never saw start, say): the resolver refuses with this reason when
   * no explicit turn and no framework turn identify the call, naming `turnId`. Completes
   * "`caller`: ...".
   */
  refusal?: (call: Info) => string | undefined;
  /**
   * How a developer gives the identity in this framework, completing "Pass ..." in the error,
   * e.g. "conversationId (your chat id) or turnId (the id of the user message)".
   */
  howTo: string;
}

/**
 * An id as a framework's config carries it (a LangGraph `thread_id`, a `turn_id` the app put on a
 * call): a non-empty string, or a number (as its string); undefined for anything else.
 */
export const idOf = (value: unknown): string | undefined =>
  (typeof value === 'string' && value !== '') || typeof value === 'number'
    ? String(value)
    : undefined;

/** Version of the derived turn format; part of every derived turn id. */
const DERIVED_PREFIX = 'tc_';

function canonicalContent(content: unknown, caller: string): string {
  try {
    // userContent turns bytes into base64 and URLs into text; the round trip makes it JSON.
    return canonicalize(JSON.parse(JSON.stringify(userContent(content)) ?? 'null'));
  } catch (cause) {
    throw new ConfigurationError({
      option: 'turnId',
      cause,
      message: `${caller}: the turn could not be derived from the user's message (${cause instanceof Error ? cause.message : String(cause)}). Pass turnId.`,
    });
  }
}

/**
 * The turn id of the last user turn of a conversation: `tc_` + SHA-256 of the conversation id,
 * the position of the turn (the how-manieth user turn it is) and the content the user wrote.
 *
 * The content is what the user wrote (`userContent`: the same words in any shape are one
 * content). A user message equal to the one before it, with no answer between them (nothing from
 * the model or a tool), is the same turn sent again (the app re-sent the request after a lost
 * reply): it does not count as a new position. Returns undefined when the conversation has no
 * user message.
 *
 * @param conversationId your chat / thread / session id (different for every conversation)
 * @param transcript the messages in order (see `TranscriptEntry`)
 */
export function deriveTurnId(
  conversationId: string,
  transcript: Iterable<TranscriptEntry | undefined>,
  caller = 'deriveTurnId',
): string | undefined {
  let position = 0;
  let last: string | undefined;
  /** What came after the last user message: nothing, only partial records, or an answer. */
  let after: 'nothing' | 'partial' | 'answer' = 'answer';
  /** The last user message repeats the one before it after only partial records. */
  let unsure = false;
  for (const entry of transcript) {
    if (entry === undefined) continue;
    if (entry.role === 'answer') {
      if (entry.partial !== true) after = 'answer';
      else if (after === 'nothing') after = 'partial';
      continue;
    }
    const content = canonicalContent(entry.content, caller);
    unsure = after === 'partial' && content === last;
    if (after === 'nothing' && content === last) continue;
    position++;
    last = content;
    after = 'nothing';
  }
  if (unsure) {
    throw new ConfigurationError({
      option: 'turnId',
      message: `${caller}: the user's message repeats the words of the turn before it, and that turn ended with a tool call or result that may be the record of a broken attempt, so this cannot be told from the same turn sent again. Nothing ran. Pass turnId (your id of the user message).`,
    });
  }
  if (last === undefined) return undefined;
  const parts = `["idempotent-tools/turn",1,${canonicalize(conversationId)},${position},${last}]`;
  return `${DERIVED_PREFIX}${sha256(parts)}`;
}

/** Check a per-call option at wrap time: a string (non-empty) or a function. */
export function checkPerCall(option: string, value: unknown, caller: string): void {
  if (value === undefined || typeof value === 'function') return;
  if (typeof value === 'string' && value !== '') return;
  throw new ConfigurationError({
    option,
    message: `${caller}: ${option} must be a non-empty string or a function of the call, got ${value === '' ? 'an empty string' : typeof value}.`,
  });
}

function perCall<Info>(
  option: string,
  value: PerCall<Info> | undefined,
  call: Info,
  caller: string,
): string | undefined {
  const out = typeof value === 'function' ? value(call) : value;
  if (out === undefined || (typeof out === 'string' && out !== '')) return out;
  throw new ConfigurationError({
    option,
    message: `${caller}: the ${option} function returned ${out === '' ? 'an empty string' : typeof out}; return a non-empty string, or undefined when it does not know.`,
  });
}

export interface TurnResolver<Info> {
  /**
   * The turn of one call. `needed: false` (a tool with a business key): undefined when nothing
   * identifies the turn, instead of the error.
   * @throws ConfigurationError when nothing identifies the turn, naming the options to set
   */
  resolve(call: Info, needed?: boolean): ResolvedTurn | undefined;
  /**
   * Whether a turn can be found for some call at all: false when neither the options nor the
   * framework give any source. Adapters check it when tools are wrapped, so that a setup that
   * can never tell conversations apart fails there, before anything runs.
   */
  readonly possible: boolean;
}

/**
 * The turn resolver of an adapter: `options.turnId`, else the framework's turn, else a turn
 * derived from the transcript with `options.conversationId` (or the framework's conversation).
 */
export function createTurnResolver<Info>(
  options: TurnIdentityOptions<Info>,
  sources: TurnSources<Info>,
  caller: string,
): TurnResolver<Info> {
  checkPerCall('turnId', options.turnId, caller);
  checkPerCall('conversationId', options.conversationId, caller);
  const refuse = (found: string, option: string) =>
    new ConfigurationError({
      option,
      message: `${caller}: ${found}, so this call cannot be told apart from the same call in another conversation or turn. Nothing ran. Pass ${sources.howTo}.`,
    });
  return {
    possible:
      options.turnId !== undefined ||
      sources.turn !== undefined ||
      ((options.conversationId !== undefined || sources.conversation !== undefined) &&
        sources.transcript !== undefined),
    resolve(call, needed = true) {
      const explicit = perCall('turnId', options.turnId, call, caller);
      if (explicit !== undefined) return { turnId: explicit, source: 'explicit' };
      const framework = sources.turn?.(call);
      if (framework !== undefined) return { turnId: framework, source: 'framework' };
      const why = sources.refusal?.(call);
      if (why !== undefined) {
        if (!needed) return undefined;
        throw new ConfigurationError({ option: 'turnId', message: `${caller}: ${why}` });
      }
      const conversation =
        perCall('conversationId', options.conversationId, call, caller) ??
        sources.conversation?.(call);
      if (conversation === undefined) {
        if (!needed) return undefined;
        throw refuse('no conversation identity and no turn id', 'conversationId');
      }
      const transcript = sources.transcript?.(call);
      const derived =
        transcript === undefined ? undefined : deriveTurnId(conversation, transcript, caller);
      if (derived !== undefined) return { turnId: derived, source: 'derived' };
      if (!needed) return undefined;
      throw refuse(
        transcript === undefined
          ? 'a conversation id but no messages to tell its turns apart'
          : 'a conversation id but no user message in it',
        'turnId',
      );
    },
  };
}
