import type { Idempotency, IdempotencyOptions } from './types.js';

/**
 * How an adapter gets its executor: the executor's own options (`{ store, ttl?, ... }`), or an
 * executor made with `createIdempotency(...)` and shared with other code (`{ idempotency }`).
 */
export type ExecutorOptions =
  | IdempotencyOptions
  | {
      /** An executor from `createIdempotency(...)`, shared with other code. */
      idempotency: Idempotency;
    };
