import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.ReplayedFailureError');

/** Replay of a call whose first run threw an error marked terminal: the stored error is thrown again, and the tool is not run again. `originalName`, `originalMessage` and `originalCode` describe it. */
export class ReplayedFailureError extends IdempotencyError {
  readonly [symbol] = true;
  readonly replayed = true as const;
  /** `name` of the original error. */
  readonly originalName: string;
  /** `message` of the original error. */
  readonly originalMessage: string;
  /** `code` of the original error, when it had a string code. */
  readonly originalCode: string | undefined;

  constructor(options: {
    /** @default built from the fields */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    originalName: string;
    originalMessage: string;
    originalCode?: string | undefined;
  }) {
    super({
      ...options,
      message:
        options.message ??
        `This call failed before with a terminal error and is not run again: ${options.originalName}: ${options.originalMessage}. Change the arguments to try something else.`,
      code: 'replayed_failure',
      retryable: false,
    });
    this.name = 'ReplayedFailureError';
    this.originalName = options.originalName;
    this.originalMessage = options.originalMessage;
    this.originalCode = options.originalCode;
  }

  static override isInstance(error: unknown): error is ReplayedFailureError {
    return hasMarker(error, symbol);
  }
}
