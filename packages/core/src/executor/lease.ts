/**
 * The lease of a running attempt: renewed while the tool runs, and the attempt's belief that it
 * still owns the call. The tool's signal aborts when the store says another attempt owns the
 * record, and when no renewal got through for a whole lease (the record may then be stale and
 * taken over): its side effects should stop.
 */
import { PersistFailedError } from '../errors/index.js';
import type { IdempotencyStore } from '../store.js';

export interface Lease {
  /** Aborted when this attempt no longer owns the call. */
  readonly signal: AbortSignal;
  /** Stop renewing (the attempt is finishing). */
  stop(): void;
}

/**
 * Renew every lease/3 without waiting for the previous renewal (one that hangs must not stop
 * the others).
 */
export function holdLease(
  store: IdempotencyStore,
  key: string,
  token: string,
  leaseMs: number,
): Lease {
  const controller = new AbortController();
  const lose = (lost: 'no-renewal' | 'taken-over') =>
    controller.abort(new PersistFailedError({ key, reason: 'lease_lost', lost, leaseMs }));
  let lastRenewed = Date.now();
  const timer = setInterval(
    () => {
      if (controller.signal.aborted) return;
      if (Date.now() - lastRenewed > leaseMs) {
        lose('no-renewal');
        return;
      }
      store.renew(key, token, leaseMs).then(
        (owned) => {
          if (owned) lastRenewed = Date.now();
          else lose('taken-over');
        },
        () => {
          // The store is unreachable: the next tick tries again (until a lease has passed).
        },
      );
    },
    Math.max(1, Math.floor(leaseMs / 3)),
  );
  timer.unref?.();
  return { signal: controller.signal, stop: () => clearInterval(timer) };
}
