/**
 * Waiting for a running duplicate: in-process wake-ups when a call of this executor settles a
 * key, the store's push across processes, an adaptive poll for stores that cannot push, and the
 * re-claims after a wait shared by the waiters of one key woken together.
 */
import type {
  ClaimInput,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
} from '../store/store.js';
import type { CallRun, LocalWaiters } from './call-run.js';

/** Longest first wait for a running duplicate on a store that pushes changes, in ms. */
const FIRST_WAIT_MS = 50;
/** Longest poll interval for stores that cannot push, in ms. */
const MAX_POLL_MS = 100;

export function createLocalWaiters(): LocalWaiters {
  const byKey = new Map<string, Set<() => void>>();
  return {
    wake(key) {
      const set = byKey.get(key);
      if (set === undefined) return;
      byKey.delete(key);
      for (const resolve of set) resolve();
    },
    wait(key, timeoutMs) {
      let set = byKey.get(key);
      if (set === undefined) {
        set = new Set();
        byKey.set(key, set);
      }
      const waiters = set;
      let timer: ReturnType<typeof setTimeout> | undefined;
      let settle!: () => void;
      const done = new Promise<void>((resolve) => {
        settle = () => {
          clearTimeout(timer);
          waiters.delete(settle);
          if (waiters.size === 0 && byKey.get(key) === waiters) byKey.delete(key);
          resolve();
        };
      });
      timer = setTimeout(settle, timeoutMs);
      waiters.add(settle);
      return { done, cancel: settle };
    },
  };
}

/**
 * Re-claims after a wait, shared per key: the waiters of this executor woken together send one
 * claim. A waiter reuses the shared answer only when it is a finished record (completed or
 * failed): its own fingerprint decides replay or drift. Any other answer (acquired by the one
 * that sent it, in progress, stale), or a failed claim, and it sends its own.
 */
export function createReclaimer(
  store: IdempotencyStore,
): (input: ClaimInput) => Promise<ClaimResult> {
  const pending = new Map<string, Promise<ClaimResult>>();
  return (input) => {
    const shared = pending.get(input.key);
    if (shared !== undefined) {
      return shared.then(
        (answer): Promise<ClaimResult> | ClaimResult =>
          answer.status === 'completed' ||
          (answer.status === 'drift' && answer.record.state !== 'in_progress')
            ? answer.record.fingerprint === input.fingerprint
              ? { status: 'completed', record: answer.record }
              : { status: 'drift', record: answer.record }
            : store.claim(input),
        () => store.claim(input),
      );
    }
    const sent = store.claim(input);
    pending.set(input.key, sent);
    const forget = () => {
      if (pending.get(input.key) === sent) pending.delete(input.key);
    };
    sent.then(forget, forget);
    return sent;
  };
}

/** Where one call is in its wait for a running duplicate. */
export interface WaitState {
  /** The next adaptive poll interval, for stores that cannot push. */
  pollMs: number;
  /** When the wait gives up, on the engine's monotonic clock (no wall-clock step moves it). */
  readonly deadline: number;
}

export function newWaitState(run: CallRun<unknown, unknown>): WaitState {
  return { pollMs: 2, deadline: run.startedTick + run.policy.waitTimeout };
}

/**
 * Wait once for the holder of `record` to settle the key: woken by this process settling it,
 * the store's push, or an adaptive poll for stores that cannot push across processes. A store
 * that pushes is asked again when the holder's lease runs out (a holder that died sends
 * nothing), at the latest once per lease of ours; the store's clock decides staleness, so an
 * expiry that the local clock already sees as past falls back to the adaptive poll. The first
 * wait is capped: a change between the claim's answer and the waiters' registration is pushed
 * to nobody, and would otherwise cost a whole lease. Whichever way the wait ends, the other wait
 * is cancelled (its timer cleared; the store's through its `signal`).
 */
export async function waitOnce(
  run: CallRun<unknown, unknown>,
  record: IdempotencyRecord,
  state: WaitState,
): Promise<void> {
  const { store, waiters } = run.engine;
  // The record's lease is on the store's clock, read against the wall clock; how long this call
  // may still wait is on the monotonic clock.
  const untilStale = record.leaseExpiresAt - Date.now() + 1;
  const tick = run.engine.now();
  const poll = !store.capabilities.notifiesChanges
    ? state.pollMs
    : untilStale <= 0
      ? state.pollMs
      : Math.min(untilStale, run.policy.lease, run.waitedMs > 0 ? run.policy.lease : FIRST_WAIT_MS);
  const timeout = Math.max(1, Math.min(state.deadline - tick, poll));
  const local = waiters.wait(run.key, timeout);
  const cancel = new AbortController();
  try {
    if (store.waitForChange === undefined) await local.done;
    else await Promise.race([local.done, store.waitForChange(run.key, timeout, cancel.signal)]);
  } finally {
    // Whichever woke first, the other wait keeps no timer (and no subscription) behind.
    local.cancel();
    cancel.abort();
  }
  state.pollMs = Math.min(state.pollMs * 2, MAX_POLL_MS);
  // Whole ms, at least 1: a call that waited reports `waited`, however short the wait.
  run.waitedMs = Math.max(1, Math.ceil(run.engine.now() - run.startedTick));
}
