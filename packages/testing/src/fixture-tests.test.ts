import { describe, expect, test } from 'vitest';
import { fixtureTests, HANG_DETECTOR_MS } from './fixture-tests.js';

describe('fixtureTests: a timeout is a hang detector, never a budget', () => {
  test('a timeout under 600 s is refused when the suite is defined, before any test is registered', () => {
    const registered: string[] = [];
    const register = (name: string) => registered.push(name);
    expect(() =>
      fixtureTests(
        register,
        15_000,
        () => 1,
        () => {},
      ),
    ).toThrow(/hang detector of at least 600000 ms, got 15000/);
    expect(registered).toEqual([]);
  });

  test('600 s and more are taken, and passed to the runner as given', () => {
    const timeouts: Array<number | undefined> = [];
    const define = fixtureTests(
      (_name, _fn, timeoutMs) => timeouts.push(timeoutMs),
      HANG_DETECTOR_MS,
      () => 1,
      () => {},
    );
    define('a', async () => {});
    expect(timeouts).toEqual([600_000]);
  });
});
