import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.RecordIntegrityError');

/**
 * Why a stored outcome was refused:
 * - `corrupt`: not JSON, or not a well-formed encrypted envelope (garbage, truncated);
 * - `unknown_key`: encrypted with a key id that is not in `encryption.keys` (or encryption is
 *   not configured);
 * - `tampered`: the authentication tag does not match: the ciphertext, its key id or IV was
 *   altered, or the record was copied under another key or state;
 * - `unencrypted`: a plaintext outcome where encryption is configured (and `acceptPlaintext` is off).
 */
export type RecordIntegrityReason = 'corrupt' | 'unknown_key' | 'tampered' | 'unencrypted';

/** The stored outcome of this call failed its integrity check (corrupt, tampered, copied from another key, or sealed with an unknown key). It was not replayed and the tool did not run. Do not retry: check the encryption keys, or inspect and delete the record. */
export class RecordIntegrityError extends IdempotencyError {
  readonly [symbol] = true;
  readonly reason: RecordIntegrityReason;
  /** The key id named by the record, when it names one. */
  readonly keyId: string | undefined;

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
    reason: RecordIntegrityReason;
    keyId?: string | undefined;
  }) {
    super({ ...options, code: 'record_integrity', retryable: false });
    this.name = 'RecordIntegrityError';
    this.reason = options.reason;
    this.keyId = options.keyId;
  }

  static override isInstance(error: unknown): error is RecordIntegrityError {
    return hasMarker(error, symbol);
  }
}
