/** A clock a test controls. `now` is a plain function, safe to pass around unbound. */
export interface TestClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Move time forward: instantly on a virtual clock, by sleeping on a real one. */
  advance(ms: number): Promise<void>;
}

export interface TestClockOptions {
  /**
   * `virtual`: `now()` only moves when `advance` is called. `real`: `now()` is `Date.now()` and
   * `advance` sleeps.
   * @default 'virtual'
   */
  mode: 'virtual' | 'real';
  /**
   * Start time of a virtual clock (ignored by a real one).
   * @default Date.now() at creation
   */
  start?: number;
}

/** Resolve after `ms` milliseconds of real time. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/**
 * A clock for one test. Pass `clock.now` to a store that takes an injected clock
 * (`createMemoryStore({ now: clock.now })`).
 *
 * ```ts
 * const clock = createTestClock();
 * await clock.advance(1_000);
 * ```
 */
export function createTestClock(options: TestClockOptions = { mode: 'virtual' }): TestClock {
  if (options.mode === 'real') {
    return {
      now: () => Date.now(),
      advance: async (ms) => {
        checkDuration(ms);
        await sleep(ms);
      },
    };
  }
  let current = options.start ?? Date.now();
  if (!Number.isFinite(current))
    throw new RangeError(`start must be a finite number, got ${current}`);
  return {
    now: () => current,
    advance: async (ms) => {
      checkDuration(ms);
      current += ms;
    },
  };
}

function checkDuration(ms: number): void {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`advance(ms) takes a finite, non-negative duration, got ${ms}`);
  }
}
