import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { parseIdempotencyKey, serializeSfString } from './header.js';

const parse = (value: string, max = 255) => parseIdempotencyKey(value, max);

describe('parseIdempotencyKey', () => {
  test('an RFC 8941 String and the raw form give the same key', () => {
    expect(parse('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toEqual({
      ok: true,
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
      form: 'sf-string',
    });
    expect(parse('8e03978e-40d5-43e8-bc93-6894a57f9324')).toEqual({
      ok: true,
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
      form: 'raw',
    });
    // What the openai SDK (Stainless) and idempotentFetch send unquoted.
    expect(parse('stainless-node-retry-5b1c')).toMatchObject({ ok: true, form: 'raw' });
    expect(parse('v1_abc.def-_')).toMatchObject({ ok: true, key: 'v1_abc.def-_' });
  });

  test('escapes, inner spaces and parameters of the String form', () => {
    expect(parse('"a \\"b\\" \\\\c"')).toMatchObject({ ok: true, key: 'a "b" \\c' });
    expect(parse('"abc";v=1;x')).toMatchObject({ ok: true, key: 'abc' });
    expect(parse('"abc"; a="q"; b=?1; c=:AAE=:; d=-1.5; e=tok/x')).toMatchObject({
      ok: true,
      key: 'abc',
    });
  });

  test.each([
    ['', 'empty'],
    ['""', 'empty'],
    ['"abc', 'closing double quote'],
    ['"a\\bc"', 'backslash escapes only'],
    ['"abc" x', 'more after'],
    ['"a", "b"', 'more after'], // two fields joined by Headers
    ['a, b', 'neither'],
    ['a b', 'neither'],
    ['abc;v=1', 'neither'],
    ['"é"', 'printable ASCII'],
    ['"abc";V=1', 'malformed name'],
  ])('%j is refused (%s)', (value, reason) => {
    const result = parse(value);
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.reason).toContain(reason);
  });

  test('the length limit counts the key, not its quotes', () => {
    expect(parse(`"${'k'.repeat(255)}"`).ok).toBe(true);
    expect(parse('k'.repeat(255)).ok).toBe(true);
    const over = parse('k'.repeat(256));
    expect(over.ok ? '' : over.reason).toContain('the limit is 255');
  });

  test('serialize then parse is the identity on printable ASCII', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[\x20-\x7e]{1,64}$/), (key) => {
        const serialized = serializeSfString(key);
        expect(parse(serialized)).toEqual({ ok: true, key, form: 'sf-string' });
      }),
    );
    expect(serializeSfString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(() => serializeSfString('é')).toThrow(TypeError);
  });
});
