/**
 * What the model sees (design section 7 (docs/design.md)), shared by every framework adapter so that all of them
 * say the same thing in the same words.
 */
import { IdempotencyError, PersistFailedError } from './errors/index.js';

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
  replayed_failure: 'do-not-retry',
  record_integrity: 'do-not-retry',
  approval_pending: 'retry-later',
  approval_rejected: 'do-not-retry',
  approval_conflict: 'do-not-retry',
};

/**
 * An idempotency error as the model should read it. Returns undefined for other errors (the
 * tool's own), which adapters pass on as the framework does.
 */
export function errorForModel(error: unknown): ModelError | undefined {
  if (!IdempotencyError.isInstance(error)) return undefined;
  return { error: error.code, message: error.message, next: nextStep(error) };
}

/** What to do next; a persist failure depends on why (the tool ran in every case). */
function nextStep(error: IdempotencyError): NextStep {
  if (PersistFailedError.isInstance(error)) {
    // The outcome of another attempt will be stored: get it. Else the effect happened and its
    // outcome is lost (check first), or it was refused and kept as a failure (do not retry).
    if (error.reason === 'lease_lost' && error.lost !== 'record-gone') return 'retry-later';
    return error.reason === 'invalid_result' ? 'do-not-retry' : 'check-first';
  }
  return NEXT[error.code] ?? 'do-not-retry';
}
