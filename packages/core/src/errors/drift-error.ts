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
    /** @default built from the fields */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    toolName?: string | undefined;
    storedFingerprint: string;
    fingerprint: string;
  }) {
    const message =
      options.message ??
      `${options.toolName ?? 'The tool'} was already called with this business key but other arguments. Nothing ran. Repeat the original arguments, or use a new business key for a new operation.`;
    super({ ...options, message, code: 'drift', retryable: false });
    this.name = 'DriftError';
    this.storedFingerprint = options.storedFingerprint;
    this.fingerprint = options.fingerprint;
  }

  static override isInstance(error: unknown): error is DriftError {
    return hasMarker(error, symbol);
  }
}
