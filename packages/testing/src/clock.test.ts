import { describe, expect, test } from 'vitest';
import { createTestClock, sleep, uniqueKey } from './index.js';

describe('createTestClock', () => {
  test('a virtual clock moves only when advanced, and now works unbound', async () => {
    const clock = createTestClock({ mode: 'virtual', start: 1_000 });
    const { now } = clock;
    expect(now()).toBe(1_000);
    await sleep(5);
    expect(now()).toBe(1_000);
    await clock.advance(250);
    expect(now()).toBe(1_250);
  });

  test('a virtual clock starts at the current time by default', () => {
    const before = Date.now();
    const now = createTestClock().now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Date.now());
  });

  test('a real clock reads Date.now and sleeps on advance', async () => {
    const clock = createTestClock({ mode: 'real' });
    const start = clock.now();
    expect(Math.abs(start - Date.now())).toBeLessThanOrEqual(5);
    await clock.advance(30);
    expect(clock.now() - start).toBeGreaterThanOrEqual(25);
  });

  test('advance rejects a negative or non-finite duration', async () => {
    for (const mode of ['virtual', 'real'] as const) {
      const clock = createTestClock({ mode });
      await expect(clock.advance(-1)).rejects.toThrow(RangeError);
      await expect(clock.advance(Number.NaN)).rejects.toThrow(RangeError);
    }
  });
});

describe('uniqueKey', () => {
  test('keys carry the prefix and never repeat', () => {
    const keys = Array.from({ length: 1_000 }, () => uniqueKey('order'));
    expect(new Set(keys).size).toBe(keys.length);
    for (const key of keys) expect(key).toMatch(/^order-[0-9a-f-]{36}$/);
  });
});
