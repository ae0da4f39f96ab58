import { hasMarker, IdempotencyError } from './idempotency-error.js';

const symbol = Symbol.for('idempotent-tools.error.InProgressError');

/** The same call is running elsewhere (HTTP 409 semantics) and its outcome was not ready in time. Nothing ran here; wait and retry the same call to get its outcome. */
export class InProgressError extends IdempotencyError {
  readonly [symbol] = true;
  /** When the running holder's lease runs out (ms since epoch), if known. */
  readonly leaseExpiresAt: number | undefined;

  constructor(options: {
    /** @default built from the fields */
    message?: string;
    key?: string | undefined;
    cause?: unknown;
    toolName?: string | undefined;
    leaseExpiresAt?: number | undefined;
    /** How long the call waited for the running attempt (`waitTimeout`), when it waited. */
    waitedMs?: number | undefined;
  }) {
    const waited =
      options.waitedMs === undefined ? '' : ` and did not finish within ${options.waitedMs} ms`;
    const message =
      options.message ??
      `${options.toolName ?? 'The tool'} is already running for this call${waited}. Nothing ran again. Wait, then retry the same call to get its outcome.`;
    super({ ...options, message, code: 'in_progress', retryable: true });
    this.name = 'InProgressError';
    this.leaseExpiresAt = options.leaseExpiresAt;
  }

  static override isInstance(error: unknown): error is InProgressError {
    return hasMarker(error, symbol);
  }
}
