import type { ExpectLike } from './expect.js';

/** The runner's `test`/`it`, as every suite of this package takes it. */
export type TestFunction = (name: string, fn: () => Promise<void>, timeoutMs?: number) => void;

/**
 * The least timeout a test of this package is given: a hang detector, never a budget. CI runs
 * on a shared, noisy 2-core machine where a 1000-call storm can take minutes; a shorter
 * per-test timeout fails a correct store there (it did: 15 s under load, issue 26).
 */
export const HANG_DETECTOR_MS = 600_000;

/**
 * Register tests that each get a fresh fixture: `setup` makes it before the body and `teardown`
 * disposes of it after, whether the body passed or threw. The one per-test setup of every suite
 * of this package (the conformance suite, the fuzz suite, the framework cases).
 * @internal
 */
export function fixtureTests<F>(
  test: TestFunction,
  timeoutMs: number,
  setup: () => F | Promise<F>,
  teardown: (fixture: F) => unknown,
): (name: string, body: (fixture: F) => Promise<void>) => void {
  if (!(timeoutMs >= HANG_DETECTOR_MS)) {
    throw new RangeError(
      `a test timeout is a hang detector of at least ${HANG_DETECTOR_MS} ms, got ${timeoutMs}: ` +
        'a shorter one fails on a loaded machine; leave timeoutMs unset',
    );
  }
  return (name, body) =>
    test(
      name,
      async () => {
        const fixture = await setup();
        try {
          await body(fixture);
        } finally {
          await teardown(fixture);
        }
      },
      timeoutMs,
    );
}

/** What every framework case suite (`runCrashCases`, `runRepeatCases`, ...) takes. */
export interface DriverCaseOptions<D> {
  /** Label of the outer `describe`. */
  name: string;
  describe: (name: string, fn: () => void) => void;
  test: TestFunction;
  expect: ExpectLike;
  /** A fresh driver (fresh store, fresh vendor and effect count) for one case. */
  createDriver: () => D | Promise<D>;
  /** Timeout of one case, in ms (a hang detector, far above any real run). Must be >= 600000. @default 600000 */
  timeoutMs?: number;
}

/**
 * `define(name, body)` for a framework case suite: each case gets a fresh driver, closed after.
 * @internal
 */
export function driverCases<D extends { close?(): Promise<void> }>(
  options: DriverCaseOptions<D>,
): (name: string, body: (driver: D) => Promise<void>) => void {
  return fixtureTests(
    options.test,
    options.timeoutMs ?? HANG_DETECTOR_MS,
    () => options.createDriver(),
    (driver) => driver.close?.(),
  );
}
