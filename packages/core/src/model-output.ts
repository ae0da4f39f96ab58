/**
 * What the model sees (DESIGN section 7), shared by every framework adapter so that all of them
 * say the same thing in the same words.
 */
import { canonicalize, sha256 } from './canonicalize.js';
import { IdempotencyError } from './errors/index.js';

/** Appended to the description of a wrapped tool. */
export const RETRY_SAFE_NOTE =
  'Safe to retry: a repeat with the same arguments returns the original result (marked "replayed": true) and does not run the action again.';

/** Appended to the description of a tool marked unsafe to retry. */
export const RETRY_UNSAFE_NOTE =
  'Not safe to retry: every call runs the action again. Before repeating a call, check whether the first one took effect.';

/** The description with the retry-safety note appended (once; an existing note is not repeated). */
export function withRetryNote(description: string | undefined, safe = true): string {
  const note = safe ? RETRY_SAFE_NOTE : RETRY_UNSAFE_NOTE;
  const base = (description ?? '').trimEnd();
  if (base.includes(note)) return base;
  return base === '' ? note : `${base}\n\n${note}`;
}

export interface MarkReplayedOptions {
  /**
   * Also mark fresh results (`replayed: false`). When false, a fresh result is returned unchanged.
   * @default false
   */
  markFresh?: boolean;
}

/**
 * The model-visible shape of a result: a plain object gets a `replayed` field
 * (`{ ...value, replayed: true }`); anything else (string, number, array, null, an object that
 * already has a `replayed` field) is wrapped as `{ result: value, replayed: true }`.
 */
export function markReplayed(
  value: unknown,
  replayed: boolean,
  options: MarkReplayedOptions = {},
): unknown {
  if (!replayed && !options.markFresh) return value;
  if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) &&
    !Object.hasOwn(value, 'replayed')
  ) {
    return { ...(value as object), replayed };
  }
  return { result: value, replayed };
}

/** What the model should do after an error. */
export type NextStep =
  | 'retry-later'
  | 'check-first'
  | 'change-arguments'
  | 'do-not-retry'
  | 'fix-input';

export interface ModelError {
  /** The error's stable code (`drift`, `in_progress`, ..., or `tool_error`). */
  error: string;
  /** What happened and what to do, in words for the model. */
  message: string;
  next: NextStep;
}

const NEXT: Record<string, NextStep> = {
  invalid_input: 'fix-input',
  drift: 'change-arguments',
  in_progress: 'retry-later',
  outcome_unknown: 'check-first',
  store_unavailable: 'retry-later',
  persist_failed: 'retry-later',
  replayed_failure: 'do-not-retry',
  record_integrity: 'do-not-retry',
};

/**
 * An idempotency error as the model should read it. Returns undefined for other errors (the
 * tool's own), which adapters pass on as the framework does.
 */
export function errorForModel(error: unknown): ModelError | undefined {
  if (!IdempotencyError.isInstance(error)) return undefined;
  return { error: error.code, message: error.message, next: NEXT[error.code] ?? 'do-not-retry' };
}

/**
 * A turn id derived from a conversation: the SHA-256 of the canonical JSON of the messages up to
 * and including the last user message. Retries within the turn (more assistant and tool messages
 * appended) keep the id; a new user message starts a new turn.
 *
 * Limits: two conversations whose history up to the last user message is identical (e.g. the same
 * one-message prompt sent twice, deliberately) share a turn id. Pass an explicit turn id, or a
 * scope per conversation, where that matters.
 *
 * @param messages the conversation, in order
 * @param isUser tells user messages apart
 * @returns `t_` + 43 base64url characters, or undefined when there is no user message
 */
export function turnIdFromMessages<M>(
  messages: readonly M[],
  isUser: (message: M) => boolean,
): string | undefined {
  let last = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (isUser(messages[i] as M)) {
      last = i;
      break;
    }
  }
  if (last < 0) return undefined;
  return `t_${sha256(canonicalize(messages.slice(0, last + 1)))}`;
}
