import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.OutcomeUnknownError');

/** An earlier attempt of this call started and never finished (its lease ran out): the side effect may or may not have happened. Nothing ran now. Check the effect (e.g. at the vendor) before acting again; do not blindly retry. */
export class OutcomeUnknownError extends IdempotencyError {
  readonly [symbol] = true;
  /** When the unfinished attempt started (ms since epoch). */
  readonly startedAt: number | undefined;

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
    startedAt?: number | undefined;
  }) {
    super({ ...options, code: 'outcome_unknown', retryable: false });
    this.name = 'OutcomeUnknownError';
    this.startedAt = options.startedAt;
  }

  static override isInstance(error: unknown): error is OutcomeUnknownError {
    return hasMarker(error, symbol);
  }
}
