import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import { deriveKey, type KeyInput } from './derive-key.js';

interface Vector {
  name: string;
  input: KeyInput;
  key: string;
  fingerprint: string;
}

const vectors = JSON.parse(
  readFileSync(new URL('../../vectors/keys.json', import.meta.url), 'utf8'),
) as { vectors: Vector[] };

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest('base64url');

describe('golden vectors: a key never changes by accident', () => {
  test('there are vectors for every kind of input', () => {
    expect(vectors.vectors.length).toBeGreaterThanOrEqual(10);
  });
  test.each(vectors.vectors.map((v) => [v.name, v] as const))('%s', (_name, vector) => {
    expect(deriveKey(vector.input)).toEqual({ key: vector.key, fingerprint: vector.fingerprint });
  });
});

describe('the key format', () => {
  test('is v1_ + SHA-256 (base64url) of the canonical parts array, recomputed independently', () => {
    const { key, fingerprint } = deriveKey({
      toolName: 'charge',
      turnId: 't1',
      args: { b: 2, a: 1 },
    });
    expect(fingerprint).toBe(sha('{"a":1,"b":2}'));
    expect(key).toBe(
      `v1_${sha(`["idempotent-tools/key","v1",null,"turn","t1","charge","${fingerprint}"]`)}`,
    );
    const business = deriveKey({ toolName: 'u', scope: 's', args: {}, businessKey: 'a@b.c' });
    expect(business.key).toBe(
      `v1_${sha('["idempotent-tools/key","v1","s","business","u","a@b.c"]')}`,
    );
  });

  test('is short, ASCII and header-safe for any input', () => {
    fc.assert(
      fc.property(
        fc
          .string({ minLength: 1, maxLength: 128, unit: 'grapheme' })
          // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
          .filter((s) => !/[\u0000-\u001f\u007f-\u009f]/.test(s) && s.length <= 128),
        fc
          .string({ minLength: 1, maxLength: 100, unit: 'binary' })
          .filter((s) => s.isWellFormed() && !s.includes('\u0000')),
        fc.option(fc.string({ minLength: 1, maxLength: 100 }), { nil: undefined }),
        fc.jsonValue(),
        (toolName, turnId, scope, args) => {
          const { key } = deriveKey({ toolName, turnId, scope, args });
          expect(key).toMatch(/^v1_[A-Za-z0-9_-]{43}$/);
          expect(key.length).toBeLessThanOrEqual(128);
        },
      ),
      { numRuns: 300 },
    );
  });

  test('parts are joined unambiguously: shifting a separator between parts changes the key', () => {
    const a = deriveKey({ toolName: 'b:c', turnId: 'a', args: {} }).key;
    const b = deriveKey({ toolName: 'c', turnId: 'a:b', args: {} }).key;
    const c = deriveKey({ toolName: 'c', turnId: 'a', scope: 'b', args: {} }).key;
    const d = deriveKey({ toolName: 'a', turnId: 'c', scope: 'b', args: {} }).key;
    expect(new Set([a, b, c, d]).size).toBe(4);
    // A tiny alphabet with separators makes near-collisions likely if joining were ambiguous.
    const part = fc.string({
      minLength: 1,
      maxLength: 6,
      unit: fc.constantFrom('a', 'b', ':', '|', '"', ','),
    });
    const parts = fc.tuple(part, part, fc.option(part, { nil: undefined }));
    fc.assert(
      fc.property(parts, parts, ([t1, n1, s1], [t2, n2, s2]) => {
        fc.pre(t1 !== t2 || n1 !== n2 || s1 !== s2);
        const k1 = deriveKey({ toolName: n1, turnId: t1, scope: s1, args: {} }).key;
        const k2 = deriveKey({ toolName: n2, turnId: t2, scope: s2, args: {} }).key;
        expect(k1).not.toBe(k2);
      }),
      { numRuns: 2000 },
    );
  });

  test('a business key ignores the turn but not the scope; the fingerprint still covers the args', () => {
    const base = { toolName: 'create_user', args: { email: 'a@x', name: 'A' }, businessKey: 'a@x' };
    const t1 = deriveKey({ ...base, turnId: 't1' });
    const t2 = deriveKey({ ...base, turnId: 't2' });
    const other = deriveKey({ ...base, scope: 'tenant-2' });
    const drifted = deriveKey({ ...base, args: { email: 'a@x', name: 'B' } });
    expect(t1.key).toBe(t2.key);
    expect(other.key).not.toBe(t1.key);
    expect(drifted.key).toBe(t1.key);
    expect(drifted.fingerprint).not.toBe(t1.fingerprint);
  });

  test('a scope never shares a key with no scope or another scope', () => {
    const none = deriveKey({ toolName: 't', turnId: 'x', args: {} }).key;
    const nullish = deriveKey({ toolName: 't', turnId: 'x', scope: 'null', args: {} }).key;
    expect(none).not.toBe(nullish);
  });
});

describe('an own __proto__ in the args (JSON.parse of model output)', () => {
  // Past the hits after which canonical JSON compiles a copier for a shape (the cache is warm).
  const MANY = 400;
  // Keys in canonical order (A < _ < z), so only the child needs re-sorting.
  const args = (proto: string | undefined): unknown =>
    JSON.parse(
      `{"Amount":{"value":1000,"currency":"EUR"},${proto === undefined ? '' : `"__proto__":${proto},`}"zip":"80331"}`,
    );

  test('args that differ only in __proto__ get different keys; equal args the same key', () => {
    const variants = [undefined, '{"role":"admin"}', '{"role":"user"}', 'null', '1'];
    let first: string[] | undefined;
    for (let i = 0; i < MANY; i++) {
      const keys = variants.map(
        (proto) => deriveKey({ toolName: 'charge', turnId: 't1', args: args(proto) }).key,
      );
      // Different args, different keys (else the second call is a wrong replay of the first).
      expect(new Set(keys).size).toBe(variants.length);
      // The same args, the same key on every call (else the tool runs twice).
      first ??= keys;
      expect(keys).toEqual(first);
    }
  });

  test('with a business key, a changed __proto__ is drift: the fingerprint differs', () => {
    for (let i = 0; i < MANY; i++) {
      const admin = deriveKey({
        toolName: 'charge',
        args: args('{"role":"admin"}'),
        businessKey: 'inv-7',
      });
      const user = deriveKey({
        toolName: 'charge',
        args: args('{"role":"user"}'),
        businessKey: 'inv-7',
      });
      const none = deriveKey({ toolName: 'charge', args: args(undefined), businessKey: 'inv-7' });
      expect(admin.key).toBe(user.key);
      expect(new Set([admin.fingerprint, user.fingerprint, none.fingerprint]).size).toBe(3);
      expect(admin.fingerprint).toBe(
        sha(
          '{"Amount":{"currency":"EUR","value":1000},"__proto__":{"role":"admin"},"zip":"80331"}',
        ),
      );
    }
  });
});

describe('bad input', () => {
  const bad: Array<[string, unknown, string]> = [
    ['not an object', null, 'input'],
    ['missing tool name', { turnId: 't', args: {} }, 'toolName'],
    ['numeric tool name', { toolName: 1, turnId: 't', args: {} }, 'toolName'],
    ['tool name with NUL', { toolName: 'a\u0000', turnId: 't', args: {} }, 'toolName'],
    ['tool name with a lone surrogate', { toolName: 'a\ud800', turnId: 't', args: {} }, 'toolName'],
    ['turn id with a lone surrogate', { toolName: 'a', turnId: '\udc00', args: {} }, 'turnId'],
    ['missing turn id', { toolName: 'a', args: {} }, 'turnId'],
    ['turn id with NUL', { toolName: 'a', turnId: 'a\u0000b', args: {} }, 'turnId'],
    ['scope with NUL', { toolName: 'a', turnId: 't', scope: '\u0000', args: {} }, 'scope'],
    ['function in args', { toolName: 'a', turnId: 't', args: { f: () => 1 } }, 'args'],
    ['empty business key', { toolName: 'a', args: {}, businessKey: '' }, 'businessKey'],
    ['BigInt business key', { toolName: 'a', args: {}, businessKey: 1n }, 'businessKey'],
    [
      'oversized business key',
      { toolName: 'a', args: {}, businessKey: 'x'.repeat(2000) },
      'businessKey',
    ],
  ];
  test.each(bad)('%s -> InvalidInputError on %s', (_name, input, field) => {
    expect(() => deriveKey(input as KeyInput)).toThrow(
      expect.objectContaining({ field, code: 'invalid_input' }),
    );
    try {
      deriveKey(input as KeyInput);
    } catch (error) {
      expect(InvalidInputError.isInstance(error)).toBe(true);
    }
  });

  test('args over maxArgsBytes, counted in UTF-8 bytes', () => {
    expect(() =>
      deriveKey({ toolName: 'a', turnId: 't', args: 'é'.repeat(60) }, { maxArgsBytes: 100 }),
    ).toThrow(/122 bytes of JSON; the limit is 100/);
    expect(
      deriveKey({ toolName: 'a', turnId: 't', args: 'e'.repeat(60) }, { maxArgsBytes: 100 }).key,
    ).toMatch(/^v1_/);
  });
});
