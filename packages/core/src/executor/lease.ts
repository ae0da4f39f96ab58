/**
 * The lease of a running attempt, and the attempt's belief that it still owns the call
 * (design section 6.5, docs/design.md). The store hands a stale call to another attempt once
 * the lease it granted has run out by the store's clock, counted from when the claim or the
 * renewal reached it. The holder counts on its own monotonic clock from when the claim or the
 * renewal was *sent* (never later than it reached the store) and gives up a margin earlier, so
 * it stops believing it owns the call before the store can hand it to anyone: whatever the wall
 * clock does, however late a reply arrives, whether or not its timers could fire.
 */
import { PersistFailedError } from '../errors/index.js';
import type { IdempotencyStore } from '../store.js';

/** The monotonic clock of leases: ms, never stepped back (`performance.now`). */
export type MonotonicClock = () => number;

/**
 * How much earlier than the lease's end, counted from when it was secured, the holder gives up:
 * a tenth of the lease. The successor waits as long again past the store's expiry before it
 * takes a call over to run it again (`TAKEOVER_GRACE`).
 */
export const leaseMargin = (leaseMs: number): number => Math.max(1, Math.ceil(leaseMs / 10));

export interface Lease {
  /** Aborted when this attempt no longer owns the call. */
  readonly signal: AbortSignal;
  /**
   * Whether this attempt still owns the call: the lease it last secured, counted on the
   * monotonic clock from when it was sent, minus the margin, has not run out, and the store has
   * not said another attempt owns it. Synchronous: true only while a timer could not yet have
   * told (a long synchronous step is seen here, not only when the event loop is free again).
   */
  stillOwned(): boolean;
  /** Stop renewing: the attempt is finishing. Replies that arrive later change nothing. */
  stop(): void;
}

/**
 * Hold the lease of `token`, claimed with `leaseMs` at `securedAt` (the clock's reading when
 * the claim was sent). Renews every lease/3 without waiting for the previous renewal (one that
 * hangs must not stop the others).
 */
export function holdLease(
  store: IdempotencyStore,
  key: string,
  token: string,
  leaseMs: number,
  securedAt: number,
  now: MonotonicClock,
): Lease {
  const controller = new AbortController();
  const margin = leaseMargin(leaseMs);
  let ownedUntil = securedAt + leaseMs - margin;
  let stopped = false;
  let expiry: ReturnType<typeof setTimeout> | undefined;

  const lose = (lost: 'no-renewal' | 'taken-over') => {
    if (stopped || controller.signal.aborted) return;
    controller.abort(new PersistFailedError({ key, reason: 'lease_lost', lost, leaseMs }));
    stop();
  };
  /** Abort the signal when the secured lease runs out (re-armed after every renewal). */
  const arm = () => {
    clearTimeout(expiry);
    expiry = setTimeout(
      () => {
        if (now() >= ownedUntil) lose('no-renewal');
        else arm();
      },
      Math.max(1, Math.ceil(ownedUntil - now())),
    );
    expiry.unref?.();
  };
  const renew = () => {
    if (stopped) return;
    const sentAt = now();
    store.renew(key, token, leaseMs).then(
      (owned) => {
        if (stopped) return; // the attempt finished: a late reply means nothing now
        if (!owned) return lose('taken-over');
        ownedUntil = Math.max(ownedUntil, sentAt + leaseMs - margin);
        arm();
      },
      () => {
        // The store is unreachable: the next renewal tries again; the expiry timer aborts the
        // signal when no renewal was secured in time.
      },
    );
  };
  const renewals = setInterval(renew, Math.max(1, Math.floor(leaseMs / 3)));
  renewals.unref?.();
  arm();

  function stop() {
    stopped = true;
    clearInterval(renewals);
    clearTimeout(expiry);
  }
  return {
    signal: controller.signal,
    stillOwned: () => !controller.signal.aborted && now() < ownedUntil,
    stop,
  };
}
