import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.ConfigurationError');

/**
 * A mistake in how the library is set up, for the developer to fix (never the model): a
 * misspelt or invalid option, a tool name the framework cannot send, or a call whose
 * conversation the library cannot tell apart from another's. Nothing ran and nothing was stored.
 * Adapters throw it where the developer sees it: when the tools are wrapped, or out of the
 * framework's call.
 */
export class ConfigurationError extends IdempotencyError {
  readonly [symbol] = true;
  /** The option to set or fix, e.g. `conversationId`, `policies.charge.ttl`. */
  readonly option: string;

  constructor(options: {
    message: string;
    option: string;
    key?: string | undefined;
    cause?: unknown;
  }) {
    super({ ...options, code: 'configuration', retryable: false });
    this.name = 'ConfigurationError';
    this.option = options.option;
  }

  static override isInstance(error: unknown): error is ConfigurationError {
    return hasMarker(error, symbol);
  }
}
