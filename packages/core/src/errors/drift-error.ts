import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.DriftError');

/** A repeat of a call whose business key matches a stored record but whose arguments differ (HTTP 422 semantics). Nothing ran. Use a new business key for a new operation, or repeat the original arguments. */
export class DriftError extends IdempotencyError {
  readonly [symbol] = true;
  /** Fingerprint (SHA-256 of the canonical args) of the stored record. */
  readonly storedFingerprint: string;
  /** Fingerprint of this call's args. */
  readonly fingerprint: string;

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
    storedFingerprint: string;
    fingerprint: string;
  }) {
    super({ ...options, code: 'drift', retryable: false });
    this.name = 'DriftError';
    this.storedFingerprint = options.storedFingerprint;
    this.fingerprint = options.fingerprint;
  }

  static override isInstance(error: unknown): error is DriftError {
    return hasMarker(error, symbol);
  }
}
