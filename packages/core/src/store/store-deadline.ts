/**
 * For store authors: a deadline on every operation, whatever the client library's own retries
 * (ioredis re-sends a command up to 20 times by default, a `pg` client that never connected
 * queues queries forever). Every store operation is safe to send again, so an operation that
 * missed its deadline may still land: the executor's retries and fences make that harmless.
 *
 * One coarse timer for all operations in flight (checked every tenth of the shortest deadline,
 * at most every 250 ms), not a timer per operation.
 */

import { InvalidInputError } from '../errors/index.js';

/** The default deadline of a store operation, in ms. */
export const DEFAULT_STORE_TIMEOUT_MS = 5_000;

interface Pending {
  at: number;
  fail: () => void;
}

const pending = new Set<Pending>();
let timer: ReturnType<typeof setInterval> | undefined;
let every = 250;

function sweep(): void {
  const now = performance.now();
  for (const entry of pending) {
    if (entry.at <= now) {
      pending.delete(entry);
      entry.fail();
    }
  }
  if (pending.size === 0 && timer !== undefined) {
    clearInterval(timer);
    timer = undefined;
    every = 250;
  }
}

/**
 * `operation`, or the error of `timeout()` when it has not settled within `ms` (give or take a
 * tenth of it). The operation is not cancelled: its late result is dropped.
 */
export function withDeadline<T>(
  operation: Promise<T>,
  ms: number,
  timeout: () => Error,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const entry: Pending = { at: performance.now() + ms, fail: () => reject(timeout()) };
    pending.add(entry);
    const tick = Math.max(10, Math.min(250, Math.floor(ms / 10)));
    if (timer === undefined || tick < every) {
      if (timer !== undefined) clearInterval(timer);
      every = tick;
      timer = setInterval(sweep, every);
      timer.unref?.();
    }
    operation.then(
      (value) => {
        pending.delete(entry);
        resolve(value);
      },
      (error: unknown) => {
        pending.delete(entry);
        reject(error);
      },
    );
  });
}

/**
 * A store's `timeoutMs` option, checked (default `DEFAULT_STORE_TIMEOUT_MS`).
 * @throws InvalidInputError unless a whole number of ms from 100 to 600000
 */
export function checkStoreTimeout(caller: string, value: unknown): number {
  if (value === undefined) return DEFAULT_STORE_TIMEOUT_MS;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 600_000) {
    return value;
  }
  throw new InvalidInputError({
    field: 'timeoutMs',
    message: `${caller}: timeoutMs must be a whole number of milliseconds from 100 to 600000, got ${String(value)}.`,
  });
}
