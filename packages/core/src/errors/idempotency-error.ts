const symbol = Symbol.for('idempotent-tools.error');

/** Stable machine-readable error codes. One code per error class. */
export type IdempotencyErrorCode =
  | 'invalid_input'
  | 'drift'
  | 'in_progress'
  | 'outcome_unknown'
  | 'store_unavailable'
  | 'persist_failed'
  | 'replayed_failure'
  | 'record_integrity'
  | 'configuration'
  | 'approval_pending'
  | 'approval_rejected'
  | 'approval_conflict';

/**
 * Base class of every error this library throws. Check with `IdempotencyError.isInstance(err)`
 * (works across duplicate installs and realms) and switch on `err.code`.
 */
export class IdempotencyError extends Error {
  readonly [symbol] = true;
  readonly code: IdempotencyErrorCode;
  /** The idempotency key of the call, when one was derived. */
  readonly key: string | undefined;
  /**
   * Whether the same call may be retried as it is. Adapters use it to tell the model what to do.
   */
  readonly retryable: boolean;

  constructor(options: {
    code: IdempotencyErrorCode;
    message: string;
    key?: string | undefined;
    retryable: boolean;
    cause?: unknown;
  }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'IdempotencyError';
    this.code = options.code;
    this.key = options.key;
    this.retryable = options.retryable;
  }

  static isInstance(error: unknown): error is IdempotencyError {
    return hasMarker(error, symbol);
  }
}

/** @internal */
export function hasMarker(error: unknown, sym: symbol): boolean {
  return (
    error != null && typeof error === 'object' && sym in error && Reflect.get(error, sym) === true
  );
}
