import { describe, expect, test } from 'vitest';
import { requestHeader, warnOnce } from './server-calls.js';

describe('server calls', () => {
  test('requestHeader reads Fetch Headers and Node header records, by a name in any case', () => {
    const fetchHeaders = new Headers({ 'X-Turn': 'a' });
    expect(requestHeader(fetchHeaders, 'x-turn')).toBe('a');
    expect(requestHeader(fetchHeaders, 'X-TURN')).toBe('a');
    expect(requestHeader(fetchHeaders, 'x-other')).toBeUndefined();
    const node = { 'x-turn': 'b', 'x-many': ['c', 'd'], 'x-number': 3 };
    expect(requestHeader(node, 'X-Turn')).toBe('b');
    expect(requestHeader(node, 'x-many')).toBe('c, d');
    expect(requestHeader(node, 'x-number')).toBeUndefined();
    expect(requestHeader(undefined, 'x-turn')).toBeUndefined();
  });

  test('warnOnce: one process warning per code and key', async () => {
    const seen: { message: string; code: unknown }[] = [];
    const listener = (warning: Error & { code?: unknown }) =>
      seen.push({ message: warning.message, code: warning.code });
    process.on('warning', listener);
    try {
      warnOnce('TEST_ONCE', 'client a', 'first a');
      warnOnce('TEST_ONCE', 'client a', 'second a');
      warnOnce('TEST_ONCE', 'client b', 'first b');
      warnOnce('TEST_OTHER', 'client a', 'other a');
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', listener);
    }
    expect(seen).toEqual([
      { message: 'first a', code: 'TEST_ONCE' },
      { message: 'first b', code: 'TEST_ONCE' },
      { message: 'other a', code: 'TEST_OTHER' },
    ]);
  });
});
