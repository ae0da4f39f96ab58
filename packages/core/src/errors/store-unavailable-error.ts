import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.StoreUnavailableError');

/** The idempotency store could not be reached, so the tool did not run (fail closed). Retry the same call later. */
export class StoreUnavailableError extends IdempotencyError {
  readonly [symbol] = true;

  constructor(options: {
    /** @default built from `storeName`, `operation` and `cause` */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    /** The store's `name`. */
    storeName?: string | undefined;
    /** The operation that failed (`claim`, `complete`, ...). */
    operation?: string | undefined;
  }) {
    const why =
      options.cause instanceof Error
        ? options.cause.message
        : String(options.cause ?? 'unknown error');
    const message =
      options.message ??
      `The idempotency store (${options.storeName ?? 'store'}) failed during ${options.operation ?? 'an operation'}: ${why}. The tool did not run; retry the same call later.`;
    super({ ...options, message, code: 'store_unavailable', retryable: true });
    this.name = 'StoreUnavailableError';
  }

  static override isInstance(error: unknown): error is StoreUnavailableError {
    return hasMarker(error, symbol);
  }
}
