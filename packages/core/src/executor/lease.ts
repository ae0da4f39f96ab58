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
import type { IdempotencyStore } from '../store/store.js';

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
 * hangs must not stop the others). One timer per lease: it fires at the next renewal or at the
 * end of the secured lease, whichever comes first. The `AbortSignal` is made when first asked
 * for (most tools never look at it); one asked for after the loss is already aborted.
 */
export function holdLease(
  store: IdempotencyStore,
  key: string,
  token: string,
  leaseMs: number,
  securedAt: number,
  now: MonotonicClock,
): Lease {
  return new HeldLease(store, key, token, leaseMs, securedAt, now);
}

// A class, not closures in an object literal: a getter in a literal costs a runtime call per
// object, and this runs once per fresh call.
class HeldLease implements Lease {
  #controller: AbortController | undefined;
  #lost: PersistFailedError | undefined;
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ownedUntil: number;
  #nextRenewal: number;
  readonly #margin: number;
  readonly #every: number;

  constructor(
    readonly store: IdempotencyStore,
    readonly key: string,
    readonly token: string,
    readonly leaseMs: number,
    securedAt: number,
    readonly now: MonotonicClock,
  ) {
    this.#margin = leaseMargin(leaseMs);
    this.#every = Math.max(1, Math.floor(leaseMs / 3));
    this.#ownedUntil = securedAt + leaseMs - this.#margin;
    // Counted from when the claim was sent, like the lease: a claim whose reply was slow is
    // renewed at once rather than a third of a lease after its reply (by then it could be lost).
    this.#nextRenewal = securedAt + this.#every;
    this.#arm();
  }

  get signal(): AbortSignal {
    // A long synchronous step may have run past the lease before any timer could fire: a signal
    // first asked for then is already aborted, as `stillOwned()` already says.
    if (!this.#stopped && this.#lost === undefined && this.now() >= this.#ownedUntil) {
      this.#lose('no-renewal');
    }
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#lost !== undefined) this.#controller.abort(this.#lost);
    }
    return this.#controller.signal;
  }

  readonly stillOwned = (): boolean => this.#lost === undefined && this.now() < this.#ownedUntil;

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #lose(lost: 'no-renewal' | 'taken-over'): void {
    if (this.#stopped || this.#lost !== undefined) return;
    this.#lost = new PersistFailedError({
      key: this.key,
      reason: 'lease_lost',
      lost,
      leaseMs: this.leaseMs,
    });
    this.#controller?.abort(this.#lost);
    this.stop();
  }

  /** Fire at the next renewal or the end of the secured lease, whichever is first. */
  #arm(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const at = Math.min(this.#nextRenewal, this.#ownedUntil);
    this.#timer = setTimeout(this.#tick, Math.max(1, Math.ceil(at - this.now())));
    this.#timer.unref?.();
  }

  readonly #tick = (): void => {
    if (this.#stopped) return;
    const at = this.now();
    if (at >= this.#ownedUntil) {
      this.#lose('no-renewal');
      return;
    }
    if (at >= this.#nextRenewal) {
      this.#nextRenewal = at + this.#every;
      this.#renew();
    }
    this.#arm();
  };

  #renew(): void {
    const sentAt = this.now();
    this.store.renew(this.key, this.token, this.leaseMs).then(
      (owned) => {
        if (this.#stopped) return; // the attempt finished: a late reply means nothing now
        if (!owned) {
          this.#lose('taken-over');
          return;
        }
        this.#ownedUntil = Math.max(this.#ownedUntil, sentAt + this.leaseMs - this.#margin);
        this.#arm();
      },
      () => {
        // The store is unreachable: the next renewal tries again; the timer ends the lease
        // when no renewal was secured in time.
      },
    );
  }
}
