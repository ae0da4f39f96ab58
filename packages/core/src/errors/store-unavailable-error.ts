import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.StoreUnavailableError');

/** The idempotency store could not be reached, so the tool did not run (fail closed). Retry the same call later. */
export class StoreUnavailableError extends IdempotencyError {
  readonly [symbol] = true;

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
  }) {
    super({ ...options, code: 'store_unavailable', retryable: true });
    this.name = 'StoreUnavailableError';
  }

  static override isInstance(error: unknown): error is StoreUnavailableError {
    return hasMarker(error, symbol);
  }
}
