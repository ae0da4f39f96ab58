import { hasMarker, IdempotencyError } from './idempotency-error.js';

/** Why an outcome could not be stored. */
export type PersistFailedReason = 'store_error' | 'lease_lost' | 'invalid_result';

const symbol = Symbol.for('idempotent-tools.error.PersistFailedError');

/** The tool ran but its outcome could not be stored (store error, or the claim was lost to another attempt). The call fails so that the caller never sees an outcome that a retry would not replay. */
export class PersistFailedError extends IdempotencyError {
  readonly [symbol] = true;
  /**
   * Why: `store_error` (the write failed), `lease_lost` (another attempt took the record over) or
   * `invalid_result` (the result is not JSON or is over `maxResultBytes`: it is kept as a failure).
   */
  readonly reason: PersistFailedReason;
  /**
   * `lease_lost`: how (`no-renewal`, `taken-over`, `at-persist`, `record-gone`); `undefined` for
   * the other reasons.
   */
  readonly lost: 'no-renewal' | 'taken-over' | 'at-persist' | 'record-gone' | undefined;

  constructor(options: {
    /** @default built from the fields */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    reason: PersistFailedReason;
    toolName?: string | undefined;
    /** `invalid_result` over the limit: the result's size and the limit, in bytes. */
    resultBytes?: number | undefined;
    limit?: number | undefined;
    /**
     * `invalid_result` over the store's own limit (not `maxResultBytes`): the store's name;
     * `resultBytes` is then the size of the outcome as stored.
     */
    store?: string | undefined;
    /** `lease_lost`: the lease, in ms. */
    leaseMs?: number | undefined;
    /**
     * `lease_lost`: how. `no-renewal` and `taken-over` abort a running tool's signal;
     * `at-persist` (the default: another attempt took over) and `record-gone` (the record
     * expired or the store lost it) refuse its outcome.
     */
    lost?: 'no-renewal' | 'taken-over' | 'at-persist' | 'record-gone' | undefined;
  }) {
    super({
      ...options,
      message: options.message ?? persistMessage(options),
      code: 'persist_failed',
      retryable: false,
    });
    this.name = 'PersistFailedError';
    this.reason = options.reason;
    this.lost = options.reason === 'lease_lost' ? (options.lost ?? 'at-persist') : undefined;
  }

  static override isInstance(error: unknown): error is PersistFailedError {
    return hasMarker(error, symbol);
  }
}

function persistMessage(o: {
  key?: string | undefined;
  cause?: unknown;
  reason: PersistFailedReason;
  toolName?: string | undefined;
  resultBytes?: number | undefined;
  limit?: number | undefined;
  store?: string | undefined;
  leaseMs?: number | undefined;
  lost?: 'no-renewal' | 'taken-over' | 'at-persist' | 'record-gone' | undefined;
}): string {
  const tool = o.toolName ?? 'The tool';
  const why = o.cause instanceof Error ? o.cause.message : String(o.cause ?? 'unknown error');
  const kept = 'The tool did run: its effect is kept as a failure so it is not repeated.';
  switch (o.reason) {
    case 'invalid_result':
      if (o.store !== undefined) {
        return `The result of ${tool} takes ${o.resultBytes ?? 'more'} bytes as stored; the ${o.store} store holds at most ${o.limit ?? 'fewer'} bytes per outcome, so it is not stored and replayed. ${kept} Return a smaller result (a reference instead of the data), and set maxResultBytes at most ${o.limit ?? 'the store limit'} on createIdempotency so results are checked against it.`;
      }
      return o.resultBytes !== undefined
        ? `The result of ${tool} is ${o.resultBytes} bytes of JSON; the limit is ${o.limit} (maxResultBytes), so it is not stored and replayed. ${kept} Return a smaller result (a reference instead of the data) or raise maxResultBytes.`
        : `The result of ${tool} is not JSON (${why}), so it cannot be stored and replayed. ${kept} Return plain JSON from the tool.`;
    case 'store_error':
      return `${tool} ran (its effect happened), but its outcome could not be stored while the call was still this attempt's (${why}). Check whether it took effect before acting: a retry of the same call reports the unfinished attempt as outcome-unknown, it does not run it again.`;
    case 'lease_lost':
      if (o.lost === 'no-renewal') {
        return `No lease renewal of ${o.key} reached the store for ${o.leaseMs} ms: another attempt may take the call over. Stop side effects.`;
      }
      if (o.lost === 'taken-over') return `Another attempt took over ${o.key} while this one ran.`;
      if (o.lost === 'record-gone') {
        return `${tool} ran, but its record is gone from the store (it expired, or the store restarted without keeping it), so its outcome was not stored. Check whether it took effect before running it again.`;
      }
      return `${tool} ran, but another attempt took the call over meanwhile (the lease of ${o.leaseMs} ms ran out), so this outcome was not stored. Retry the same call to get the stored outcome.`;
  }
}
