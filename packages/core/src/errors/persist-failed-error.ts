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

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
    reason: PersistFailedReason;
  }) {
    super({ ...options, code: 'persist_failed', retryable: false });
    this.name = 'PersistFailedError';
    this.reason = options.reason;
  }

  static override isInstance(error: unknown): error is PersistFailedError {
    return hasMarker(error, symbol);
  }
}
