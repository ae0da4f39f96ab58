/**
 * What happened to one call (DESIGN section 9). Every attempt emits exactly one event.
 * - `executed`: the tool ran and its outcome was stored.
 * - `replayed`: a stored outcome was returned; the tool did not run.
 * - `waited`: the call waited for a running duplicate, then replayed its outcome.
 * - `reconciled`: a stale attempt's effect was found by `reconcile` and adopted; the tool did not run.
 * - `drift`: same business key, other arguments: rejected.
 * - `in-progress`: a duplicate was running and the call did not wait (or waited too long).
 * - `failed`: the tool threw (its claim was released, or the error stored if terminal), or a
 *   stored terminal error was replayed.
 * - `persist-failed`: the tool ran but its outcome could not be stored.
 * - `outcome-unknown`: an earlier attempt died mid-way; the call refused to guess.
 * - `store-unavailable`: the store could not be reached; the tool did not run.
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
  | 'store-unavailable';

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
}

export type EventHandler = (event: IdempotencyEvent) => void;
