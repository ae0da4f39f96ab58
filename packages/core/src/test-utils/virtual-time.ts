/**
 * Tests of leases, waits and stale attempts on virtual time: the clock the executor and the
 * memory store read (timers, `Date`, `performance.now`) is vitest's fake clock, and whenever the
 * test waits on nothing but timers, time jumps to the next one. A lease of 30 s and a settle
 * window of a minute take no real time, and no result depends on how fast the machine is.
 *
 * Only for tests that wait on nothing outside the process (the memory store, in-process
 * servers do not qualify): a real socket's reply arrives in real time, while virtual time would
 * run leases out before it.
 */
import { vi } from 'vitest';

/** Idle turns of the real event loop, with no timer pending, before the body is declared stuck. */
const STUCK_AFTER = 1_000;

const realImmediate = globalThis.setImmediate;
const drain = () => new Promise<void>((resolve) => realImmediate(resolve));

/**
 * Run `body` on virtual time (see the module's comment). Create stores and executors inside the
 * body, so they read the fake clock.
 *
 * @throws the body's error; an Error when the body waits on something no timer will end
 */
export async function inVirtualTime<T>(body: () => Promise<T> | T): Promise<T> {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'],
  });
  try {
    let settled = false;
    const result = Promise.resolve()
      .then(body)
      .finally(() => {
        settled = true;
      });
    result.catch(() => {});
    let idle = 0;
    while (!settled) {
      // Let every promise chain run to its next wait before time moves.
      await drain();
      if (settled) break;
      if (vi.getTimerCount() === 0) {
        if (++idle > STUCK_AFTER) {
          throw new Error('inVirtualTime: the test waits on something no timer will end');
        }
        continue;
      }
      idle = 0;
      await vi.advanceTimersToNextTimerAsync();
    }
    return await result;
  } finally {
    vi.useRealTimers();
  }
}

/** `test(name, fn)`'s body on virtual time: `test('...', virtual(async () => { ... }))`. */
export const virtual =
  <A extends unknown[], T>(body: (...args: A) => Promise<T> | T): ((...args: A) => Promise<T>) =>
  (...args) =>
    inVirtualTime(() => body(...args));
