import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.OutcomeUnknownError');

/** An earlier attempt of this call started and never finished (its lease ran out): the side effect may or may not have happened. Nothing ran now. Check the effect (e.g. at the vendor) before acting again; do not blindly retry. */
export class OutcomeUnknownError extends IdempotencyError {
  readonly [symbol] = true;
  /** When the unfinished attempt started (ms since epoch). */
  readonly startedAt: number | undefined;

  constructor(options: {
    /** @default built from the fields */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    toolName?: string | undefined;
    startedAt?: number | undefined;
  }) {
    const started =
      options.startedAt === undefined
        ? ''
        : ` started at ${new Date(options.startedAt).toISOString()}`;
    const message =
      options.message ??
      `An earlier attempt of ${options.toolName ?? 'this call'}${started} never finished: its effect may or may not have happened. It was not run again. Check whether it took effect before acting; do not retry blindly.`;
    super({ ...options, message, code: 'outcome_unknown', retryable: false });
    this.name = 'OutcomeUnknownError';
    this.startedAt = options.startedAt;
  }

  static override isInstance(error: unknown): error is OutcomeUnknownError {
    return hasMarker(error, symbol);
  }
}
