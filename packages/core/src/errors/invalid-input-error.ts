import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.InvalidInputError');

/** Bad input to a public function (key parts, args, options). Nothing ran and nothing was stored; fix the input before calling again. */
export class InvalidInputError extends IdempotencyError {
  readonly [symbol] = true;
  /** The input field at fault, e.g. `toolName`, `args`, `ttl`. */
  readonly field: string;

  constructor(options: {
    message: string;
    key?: string | undefined;
    cause?: unknown;
    field: string;
  }) {
    super({ ...options, code: 'invalid_input', retryable: false });
    this.name = 'InvalidInputError';
    this.field = options.field;
  }

  static override isInstance(error: unknown): error is InvalidInputError {
    return hasMarker(error, symbol);
  }
}
