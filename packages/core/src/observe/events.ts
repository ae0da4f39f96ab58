/**
 * What happened to one call (design section 9 (docs/design.md)). Every call whose key could be derived emits
 * exactly one event, whichever way it ends (a call rejected before that, with an
 * `InvalidInputError` on its tool name, turn id, scope or args, touches no store and emits none).
 * - `executed`: the tool ran and its outcome was stored.
 * - `replayed`: a stored outcome was returned; the tool did not run.
 * - `waited`: the call waited for a running duplicate, then replayed its outcome.
 * - `reconciled`: a stale attempt's effect was found by `reconcile` and adopted; the tool did not run.
 * - `drift`: same business key, other arguments: rejected.
 * - `in-progress`: a duplicate was running and the call did not wait (or waited too long).
 * - `failed`: the tool threw (its claim was released, or the error stored if terminal), or a
 *   stored terminal error was replayed (`errorCode: 'replayed_failure'`).
 * - `persist-failed`: the tool ran but its outcome could not be stored.
 * - `outcome-unknown`: an earlier attempt died mid-way; the call refused to guess.
 * - `store-unavailable`: the store could not be reached; the tool did not run.
 * - `unguarded`: the store could not be reached and the tool ran without protection
 *   (`onStoreUnavailable: 'fail-open'`); nothing was stored, a retry runs it again.
 * - `integrity-failed`: the stored outcome failed its integrity check (corrupt, tampered,
 *   copied from another key, unknown encryption key): not replayed; the tool did not run.
 * - `settled`: not a call but an operator's decision (`idempotency.settle`): a stuck
 *   in-progress record marked completed with a given outcome, or released; `operator` says
 *   who, why and what.
 */
export type CallOutcome =
  | 'executed'
  | 'replayed'
  | 'waited'
  | 'reconciled'
  | 'drift'
  | 'in-progress'
  | 'failed'
  | 'persist-failed'
  | 'outcome-unknown'
  | 'store-unavailable'
  | 'unguarded'
  | 'integrity-failed'
  | 'settled';

/** Every outcome, in the order of `CallOutcome`. */
export const CALL_OUTCOMES: readonly CallOutcome[] = [
  'executed',
  'replayed',
  'waited',
  'reconciled',
  'drift',
  'in-progress',
  'failed',
  'persist-failed',
  'outcome-unknown',
  'store-unavailable',
  'unguarded',
  'integrity-failed',
  'settled',
];

/**
 * One call, as observers see it. It never carries the raw args or result: only their fingerprint
 * and sizes (`args` is there only when the executor was created with `exposeArgs: true`).
 */
export interface IdempotencyEvent {
  key: string;
  toolName: string;
  scope: string | undefined;
  turnId: string | undefined;
  outcome: CallOutcome;
  /** The store's `name`. */
  store: string;
  /** When the call started and ended, ms since the epoch. */
  startedAt: number;
  endedAt: number;
  durationMs: number;
  /** Time spent waiting for a running duplicate, when the call waited. */
  waitedMs?: number;
  /** `code` of the error the call ended with, if any (`IdempotencyError` codes, or `tool_error`). */
  errorCode?: string;
  /** SHA-256 (base64url) of the canonical (RFC 8785) args: equal args, equal fingerprint. */
  argsFingerprint: string;
  /** Size of the canonical args, in UTF-8 bytes. */
  argsBytes: number;
  /**
   * Size of the stored outcome's JSON (before encryption, when `encryption` is on), in UTF-8
   * bytes: present when the call returned a value or replayed a stored one (`executed`, `replayed`, `waited`, `reconciled`,
   * and a replayed terminal failure).
   */
  resultBytes?: number;
  /**
   * The raw args. Only when the executor was created with `exposeArgs: true` (debugging only:
   * args may hold secrets and personal data). Sinks leave it out unless told otherwise.
   */
  args?: unknown;
  /** An operator's settlement (`outcome: 'settled'`): who, why, and what was decided. */
  operator?: { by: string; reason: string; action: 'completed' | 'released' };
}

export type EventHandler = (event: IdempotencyEvent) => void;

/**
 * True when the call returned (or rethrew) a stored outcome instead of running the tool:
 * `replayed`, `waited`, `reconciled`, or a replayed terminal failure. The replay-rate monitor and
 * the audit logs' `stats` count these.
 */
export function isReplay(event: Pick<IdempotencyEvent, 'outcome' | 'errorCode'>): boolean {
  return (
    event.outcome === 'replayed' ||
    event.outcome === 'waited' ||
    event.outcome === 'reconciled' ||
    (event.outcome === 'failed' && event.errorCode === 'replayed_failure')
  );
}
