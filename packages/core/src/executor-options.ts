import { InvalidInputError } from './errors/index.js';
import { createIdempotency, type Idempotency, type IdempotencyOptions } from './executor.js';

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

/**
 * The executor an adapter's options name: `options.idempotency` as it is, or a new one from
 * `createIdempotency(options)` (adapter-only fields are ignored by it).
 *
 * @param caller the adapter function, for the error messages
 * @throws InvalidInputError when the options name neither or both, or something else
 */
export function executorFrom(options: unknown, caller: string): Idempotency {
  const o = options as Partial<IdempotencyOptions & { idempotency: Idempotency }> | null;
  if (o === null || typeof o !== 'object' || (o.store == null) === (o.idempotency == null)) {
    throw new InvalidInputError({
      field: 'store',
      message: `${caller} needs exactly one of { store } or { idempotency }: e.g. ${caller}(..., { store: openSqliteStore('agent.db') }).`,
    });
  }
  if (o.idempotency != null) {
    if (typeof o.idempotency.run !== 'function') {
      throw new InvalidInputError({
        field: 'idempotency',
        message: `${caller}: idempotency must be an executor from createIdempotency({ store }).`,
      });
    }
    return o.idempotency;
  }
  return createIdempotency(o as IdempotencyOptions);
}
