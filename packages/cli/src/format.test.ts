import { describe, expect, test } from 'vitest';
import { duration, fields, parseDuration, percent, relative, table } from './format.js';

describe('format', () => {
  test('parseDuration', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('250')).toBe(250);
    for (const bad of ['', 'soon', '-1h', '0', '1w', 'h'])
      expect(parseDuration(bad)).toBeUndefined();
  });

  test('duration and relative', () => {
    expect(duration(850)).toBe('850ms');
    expect(duration(65_000)).toBe('1m 5s');
    expect(duration(86_400_000 + 3 * 3_600_000 + 5_000)).toBe('1d 3h');
    expect(duration(3_600_000 + 5_000)).toBe('1h');
    expect(relative(2_000, 1_000)).toBe('in 1s');
    expect(relative(1_000, 61_000)).toBe('1m ago');
    expect(percent(1 / 3)).toBe('33.3%');
  });

  test('table and fields align columns', () => {
    expect(
      table(
        ['A', 'LONG'],
        [
          ['xyz', '1'],
          ['q', 'two\nlines'],
        ],
      ),
    ).toBe('A    LONG\nxyz  1\nq    two lines');
    expect(
      fields([
        ['a', '1'],
        ['long', '2'],
      ]),
    ).toBe('a     1\nlong  2');
  });
});
