import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, test, vi } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import { canonicalize, fingerprint, sha256 } from './canonicalize.js';

const vectors = new URL('../../../../../shared/vectors/rfc8785/', import.meta.url);

/** Independent, obviously correct oracle for JSON values (no toJSON, no exotic objects). */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${reference(record[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Compares two strings by their UTF-16 code units (the RFC 8785 order), written out. */
function compareUtf16(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a.charCodeAt(i) - b.charCodeAt(i);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/**
 * A second, tiny RFC 8785 reference for JSON values, independent of `canonicalize` (checked
 * against the official vectors below): own keys sorted by UTF-16 code units, each value read
 * through its own property descriptor (so an own `__proto__` is data, whatever the prototype),
 * strings and numbers formatted by JSON.stringify (ES Number::toString, minimal escapes).
 */
function rfc8785(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(rfc8785).join(',')}]`;
  const members = Object.keys(value)
    .sort(compareUtf16)
    .map(
      (k) => `${JSON.stringify(k)}:${rfc8785(Object.getOwnPropertyDescriptor(value, k)!.value)}`,
    );
  return `{${members.join(',')}}`;
}

type Ordered = string | { readonly entries: [string, Ordered][] } | Ordered[];

/** Tiny strict parser of compact JSON that keeps object keys in text order. */
function parseOrdered(text: string): Ordered {
  let at = 0;
  const value = (): Ordered => {
    const c = text[at];
    if (c === '{') {
      at++;
      const entries: [string, Ordered][] = [];
      if (text[at] === '}') {
        at++;
        return { entries };
      }
      for (;;) {
        const key = JSON.parse(scalar()) as string;
        expect(text[at++]).toBe(':');
        entries.push([key, value()]);
        if (text[at] === '}') {
          at++;
          return { entries };
        }
        expect(text[at++]).toBe(',');
      }
    }
    if (c === '[') {
      at++;
      const items: Ordered[] = [];
      if (text[at] === ']') {
        at++;
        return items;
      }
      for (;;) {
        items.push(value());
        if (text[at] === ']') {
          at++;
          return items;
        }
        expect(text[at++]).toBe(',');
      }
    }
    return scalar();
  };
  const scalar = (): string => {
    const start = at;
    if (text[at] === '"') {
      at++;
      while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
      at++;
    } else {
      while (at < text.length && !',:]}'.includes(text[at]!)) at++;
    }
    const token = text.slice(start, at);
    JSON.parse(token); // throws on anything that is not a JSON scalar (e.g. whitespace)
    return token;
  };
  const result = value();
  expect(at).toBe(text.length);
  return result;
}

function expectSortedEverywhere(node: Ordered): void {
  if (typeof node === 'string') return;
  if (Array.isArray(node)) {
    for (const item of node) expectSortedEverywhere(item);
    return;
  }
  for (let i = 1; i < node.entries.length; i++) {
    // JS string comparison is by UTF-16 code units, the RFC 8785 order.
    expect(node.entries[i - 1]![0] < node.entries[i]![0]).toBe(true);
  }
  for (const [, item] of node.entries) expectSortedEverywhere(item);
}

/** Same data, every object rebuilt with its keys inserted in a random order. */
function shuffleKeys(value: unknown, next: () => number): unknown {
  if (Array.isArray(value)) return value.map((item) => shuffleKeys(item, next));
  if (typeof value !== 'object' || value === null) return value;
  const keys = Object.keys(value);
  for (let i = keys.length - 1; i > 0; i--) {
    const j = next() % (i + 1);
    [keys[i], keys[j]] = [keys[j]!, keys[i]!];
  }
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    Object.defineProperty(out, k, {
      value: shuffleKeys((value as Record<string, unknown>)[k], next),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

function expectInvalid(value: unknown, ...fragments: string[]): InvalidInputError {
  let caught: unknown;
  try {
    canonicalize(value);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(InvalidInputError);
  const error = caught as InvalidInputError;
  expect(InvalidInputError.isInstance(error)).toBe(true);
  expect(error.code).toBe('invalid_input');
  expect(error.field).toBe('args');
  for (const fragment of fragments) expect(error.message).toContain(fragment);
  return error;
}

const unicodeJson = fc.jsonValue({ stringUnit: 'binary', maxDepth: 4 });
const loneSurrogate = fc.oneof(
  fc.integer({ min: 0xd800, max: 0xdbff }),
  fc.integer({ min: 0xdc00, max: 0xdfff }),
);

describe('RFC 8785 test vectors', () => {
  const inputs = readdirSync(new URL('input/', vectors)).filter((f) => f.endsWith('.json'));

  test('are present', () => {
    expect(inputs.length).toBeGreaterThanOrEqual(6);
  });

  test.each(inputs)('%s: the test reference rfc8785() is byte-exact too', (file) => {
    const input = readFileSync(new URL(`input/${file}`, vectors), 'utf8');
    const expected = readFileSync(new URL(`output/${file}`, vectors), 'utf8').replace(/\n$/, '');
    expect(rfc8785(JSON.parse(input))).toBe(expected);
  });

  test.each(inputs)('%s is byte-exact', (file) => {
    const input = readFileSync(new URL(`input/${file}`, vectors), 'utf8');
    let expected = readFileSync(new URL(`output/${file}`, vectors));
    if (expected.at(-1) === 0x0a) expected = expected.subarray(0, -1);
    const actual = Buffer.from(canonicalize(JSON.parse(input)), 'utf8');
    expect(actual.toString('hex')).toBe(expected.toString('hex'));
    const hex = readFileSync(new URL(`outhex/${file.replace(/\.json$/, '.txt')}`, vectors), 'utf8');
    expect(actual.toString('hex')).toBe(hex.replace(/\s+/g, ''));
  });
});

describe('key order', () => {
  test('sorts by UTF-16 code units, integer-like keys as strings', () => {
    expect(canonicalize({ '10': 1, '2': 2, a: 3, '1': 0 })).toBe('{"1":0,"10":1,"2":2,"a":3}');
    expect(canonicalize(JSON.parse('{"a":3,"10":1,"2":2,"1":0}'))).toBe(
      '{"1":0,"10":1,"2":2,"a":3}',
    );
    expect(canonicalize({ b: { '9': 0, '10': 0 }, a: [{ '100': 1, '20': 2 }] })).toBe(
      '{"a":[{"100":1,"20":2}],"b":{"10":0,"9":0}}',
    );
    expect(canonicalize({ 2: 'x', ' ': 'space', '': 'empty', A: 0, a: 0 })).toBe(
      '{"":"empty"," ":"space","2":"x","A":0,"a":0}',
    );
  });

  test('compares code units, not code points (an astral key sorts before U+FFFF)', () => {
    expect(canonicalize({ '\uffff': 1, '\u{1f600}': 2, z: 3, é: 4 })).toBe(
      '{"z":3,"é":4,"😀":2,"\uffff":1}',
    );
  });

  test('ignores the locale', () => {
    expect(canonicalize({ péché: 1, pêche: 2, peach: 3, sin: 4 })).toBe(
      '{"peach":3,"péché":1,"pêche":2,"sin":4}',
    );
  });

  test('keeps a __proto__ own property (from JSON.parse) as a plain key', () => {
    const value = JSON.parse('{"z":1,"__proto__":{"b":1,"a":2},"a":0}');
    expect(canonicalize(value)).toBe('{"__proto__":{"a":2,"b":1},"a":0,"z":1}');
  });

  test('sorts large objects (native sort path) and many shapes (shape cache)', () => {
    const big: Record<string, number> = {};
    for (let i = 0; i < 300; i++) big[`k${(i * 7919) % 300}`] = i;
    expect(canonicalize(big)).toBe(reference(big));
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 400; i++) {
        const value = { [`z${i}`]: i, [`a${i % 7}`]: { y: i, x: [i] }, m: null };
        expect(canonicalize(value)).toBe(reference(value));
      }
    }
  });

  test('does not modify the input (works on deeply frozen values)', () => {
    const value = Object.freeze({
      b: Object.freeze([Object.freeze({ d: 1, c: 2 })]),
      a: Object.freeze({ f: undefined, e: new Date(0) }),
    });
    expect(canonicalize(value)).toBe('{"a":{"e":"1970-01-01T00:00:00.000Z"},"b":[{"c":2,"d":1}]}');
    expect(Object.keys(value)).toEqual(['b', 'a']);
    expect(Object.keys(value.b[0]!)).toEqual(['d', 'c']);
  });
});

describe('compiled copiers (shapes seen many times)', () => {
  // More than the hits after which a shape gets a compiled copier.
  const MANY = 400;

  test('the same shape with different values, nested, undefined, toJSON', () => {
    for (let i = 0; i < MANY; i++) {
      const value = {
        zeta: i % 3 === 0 ? undefined : i,
        alpha: { y: `s${i}`, x: [i, null, i % 2 === 0] },
        mid: i % 5 === 0 ? new Date(i) : { d: -i / 7, c: 'é😀' },
        beta: i % 7 === 0 ? null : [{ q: 1, p: 2 }],
      };
      expect(canonicalize(value)).toBe(reference(JSON.parse(JSON.stringify(value))));
    }
  });

  test('values the fast path rejects still get the precise error', () => {
    for (let i = 0; i < MANY; i++) canonicalize({ b: i, a: { d: i, c: i } });
    expectInvalid({ b: Number.NaN, a: { d: 1, c: 2 } }, 'args.b is NaN');
    expectInvalid({ b: 1, a: { d: 10n, c: 2 } }, 'args.a.d is a BigInt');
    expectInvalid({ b: 1, a: { d: () => 1, c: 2 } }, 'args.a.d is a function');
    expectInvalid({ b: Symbol('s'), a: { d: 1, c: 2 } }, 'args.b is a symbol');
    expectInvalid({ b: 'x\ud800', a: { d: 1, c: 2 } }, 'args.b is a string with a lone surrogate');
    const self: Record<string, unknown> = { b: 1 };
    self.a = { d: self, c: 1 };
    expectInvalid(self, 'args.a.d is a circular reference');
    expectInvalid({ b: 1, a: { d: 1, c: new Map() } }, 'args.a.c is a Map');
    expect(canonicalize({ b: Object(1), a: { d: Object('s'), c: Object.create(null) } })).toBe(
      '{"a":{"c":{},"d":"s"},"b":1}',
    );
  });

  test('hostile key names are data, never code', async () => {
    // A fresh module instance, with a spy on the Function constructor to see the generated code.
    vi.resetModules();
    const fresh = await import('./canonicalize.js');
    const sources: string[] = [];
    const original = globalThis.Function;
    globalThis.Function = new Proxy(original, {
      construct(target, args: string[]) {
        sources.push(args.at(-1)!);
        return Reflect.construct(target, args) as object;
      },
    });
    const marker = globalThis as { pwned?: unknown };
    const hostile = [
      '"',
      '\\',
      '\u2028',
      '\u2029',
      '\n',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a template literal injection attempt
      '`${globalThis.pwned = 1}`',
      '*/ globalThis.pwned = 2; /*',
      '"});globalThis.pwned=3;({"',
      '"});process.exit(1);({"',
      "'});globalThis.pwned=4;({'",
      'constructor',
      'toString',
      'hasOwnProperty',
      'valueOf',
      'o',
      'd',
      'v0',
      'walk',
      'BAIL',
      '',
    ];
    const keys = [...hostile].reverse();
    try {
      for (let i = 0; i < MANY; i++) {
        const value: Record<string, unknown> = {};
        for (let k = 0; k < keys.length; k++) {
          value[keys[k]!] = k === 0 ? { b: i, a: i } : `${i}:${k}`;
        }
        expect(fresh.canonicalize(value)).toBe(reference(value));
      }
      for (const part of [hostile.slice(0, 10), hostile.slice(10)]) {
        for (let i = 0; i < MANY; i++) {
          const value: Record<string, unknown> = {};
          for (const k of [...part].reverse()) value[k] = i;
          const text = fresh.canonicalize(value);
          expect(text).toBe(reference(value));
          expect(Object.keys(JSON.parse(text) as object)).toEqual([...part].sort());
        }
      }
    } finally {
      globalThis.Function = original;
    }
    expect(marker.pwned).toBeUndefined();
    // One copier for the 20-key shape, one for each part, one for the { b, a } value.
    expect(sources).toHaveLength(4);
    for (const k of hostile) expect(sources[0]).toContain(`o[${JSON.stringify(k)}]`);
  });

  test('__proto__ and array-index keys keep their place', () => {
    for (let i = 0; i < MANY; i++) {
      const proto = JSON.parse(`{"z":${i},"__proto__":{"b":1,"a":${i}},"a":0}`) as unknown;
      expect(canonicalize(proto)).toBe(`{"__proto__":{"a":${i},"b":1},"a":0,"z":${i}}`);
      expect(canonicalize({ b: i, '10': 1, '2': 2 })).toBe(`{"10":1,"2":2,"b":${i}}`);
    }
  });

  test('getters are read in canonical order, like the slow path', () => {
    for (let i = 0; i < MANY; i++) {
      const mutating: Record<string, unknown> = {
        c: 3,
        get a() {
          delete mutating.b;
          return i;
        },
        b: 2,
      };
      expect(canonicalize(mutating)).toBe(`{"a":${i},"c":3}`);
    }
  });

  test('falls back when code generation from strings is forbidden', async () => {
    vi.resetModules();
    const fresh = await import('./canonicalize.js');
    const original = globalThis.Function;
    let attempts = 0;
    globalThis.Function = function forbidden() {
      attempts++;
      throw new EvalError('Code generation from strings disallowed for this context');
    } as unknown as FunctionConstructor;
    try {
      for (let i = 0; i < MANY; i++) {
        const value = { b: i, a: { d: [i], c: 'x' } };
        expect(fresh.canonicalize(value)).toBe(reference(value));
      }
    } finally {
      globalThis.Function = original;
    }
    expect(attempts).toBe(1);
  });
});

describe('__proto__, integer-like keys and null-prototype objects next to re-sorted children', () => {
  // More than the hits after which a shape gets a compiled copier (and the shape cache is warm).
  const MANY = 400;

  test('the issue 16 repro: an own __proto__ after a re-sorted sibling is kept on every call', () => {
    const text = '{"Amount":{"b":1,"a":2},"__proto__":{"role":"admin"}}';
    const seen = new Set<string>();
    for (let i = 0; i < MANY; i++) seen.add(canonicalize(JSON.parse(text)));
    expect([...seen]).toEqual(['{"Amount":{"a":2,"b":1},"__proto__":{"role":"admin"}}']);
  });

  test('__proto__ first, middle, last, nested, in arrays of objects, with any value', () => {
    // [JSON text (keys in this order, as a model sends them), its canonical text]; i varies.
    const cases: Array<(i: number) => [string, string]> = [
      // First (already sorted: lowercase keys sort after "_").
      (i) => [
        `{"__proto__":{"role":"admin"},"amount":{"b":1,"a":${i}}}`,
        `{"__proto__":{"role":"admin"},"amount":{"a":${i},"b":1}}`,
      ],
      // Middle, after the re-sorted child.
      (i) => [
        `{"Amount":{"b":1,"a":${i}},"__proto__":{"role":"admin"},"currency":"EUR"}`,
        `{"Amount":{"a":${i},"b":1},"__proto__":{"role":"admin"},"currency":"EUR"}`,
      ],
      // Last, with null, a number, a string, an array, an empty object, a re-sorted object.
      ...['null', '7', '"x"', '[1,{"b":1,"a":2}]', '{}', '{"b":1,"a":2}'].map(
        (value) =>
          (i: number): [string, string] => [
            `{"Amount":{"b":1,"a":${i}},"Currency":"EUR","__proto__":${value}}`,
            `{"Amount":{"a":${i},"b":1},"Currency":"EUR","__proto__":${value.replace('{"b":1,"a":2}', '{"a":2,"b":1}')}}`,
          ],
      ),
      // The changed child is an array, not an object.
      (i) => [
        `{"A":[{"b":1,"a":${i}}],"__proto__":{"role":"admin"}}`,
        `{"A":[{"a":${i},"b":1}],"__proto__":{"role":"admin"}}`,
      ],
      // Nested one level down.
      (i) => [
        `{"order":{"Amount":{"b":1,"a":${i}},"__proto__":{"role":"admin"}}}`,
        `{"order":{"Amount":{"a":${i},"b":1},"__proto__":{"role":"admin"}}}`,
      ],
      // In an array of objects (the array is copied too).
      (i) => [
        `[{"Amount":{"b":1,"a":${i}},"__proto__":{"role":"admin"}},{"Amount":{"b":3,"a":4},"__proto__":{"role":"user"}}]`,
        `[{"Amount":{"a":${i},"b":1},"__proto__":{"role":"admin"}},{"Amount":{"a":4,"b":3},"__proto__":{"role":"user"}}]`,
      ],
      // Keys that need reordering around __proto__, alone, and in an unsorted shape.
      (i) => [
        `{"z":{"b":1,"a":${i}},"__proto__":{"y":1,"x":2},"a":0}`,
        `{"__proto__":{"x":2,"y":1},"a":0,"z":{"a":${i},"b":1}}`,
      ],
      (i) => [`{"__proto__":{"b":1,"a":${i}}}`, `{"__proto__":{"a":${i},"b":1}}`],
      (i) => [
        `{"Z":${i},"__proto__":null,"A":{"b":1,"a":2}}`,
        `{"A":{"a":2,"b":1},"Z":${i},"__proto__":null}`,
      ],
    ];
    for (let i = 0; i < MANY; i++) {
      for (const make of cases) {
        const [text, expected] = make(i);
        const value: unknown = JSON.parse(text);
        expect(canonicalize(value)).toBe(expected);
        expect(fingerprint(value)).toBe(sha256(expected));
      }
    }
    // The input was not touched: its __proto__ is still an own property, its prototype intact.
    const input = JSON.parse('{"Amount":{"b":1,"a":2},"__proto__":{"role":"admin"}}') as object;
    canonicalize(input);
    expect(Object.keys(input)).toEqual(['Amount', '__proto__']);
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
  });

  test('integer-like keys next to re-sorted children and __proto__', () => {
    const cases: Array<(i: number) => [string, string]> = [
      // Enumerated 1, 2, B: already sorted, so copied in place.
      (i) => [
        `{"1":{"b":1,"a":${i}},"2":0,"B":{"d":1,"c":2}}`,
        `{"1":{"a":${i},"b":1},"2":0,"B":{"c":2,"d":1}}`,
      ],
      // Enumerated 0, 9, 10: code-unit order is 0, 10, 9.
      (i) => [
        `{"10":{"b":1,"a":${i}},"9":0,"0":[{"b":1,"a":2}]}`,
        `{"0":[{"a":2,"b":1}],"10":{"a":${i},"b":1},"9":0}`,
      ],
      (i) => [
        `{"0":{"b":1,"a":${i}},"Z":1,"__proto__":{"role":"admin"},"a":{"d":1,"c":2}}`,
        `{"0":{"a":${i},"b":1},"Z":1,"__proto__":{"role":"admin"},"a":{"c":2,"d":1}}`,
      ],
      (i) => [
        `{"9":{"b":1,"a":${i}},"10":1,"__proto__":2}`,
        `{"10":1,"9":{"a":${i},"b":1},"__proto__":2}`,
      ],
    ];
    for (let i = 0; i < MANY; i++) {
      for (const make of cases) {
        const [text, expected] = make(i);
        expect(canonicalize(JSON.parse(text))).toBe(expected);
      }
    }
  });

  test('null-prototype objects with __proto__ and integer-like keys', () => {
    const bare = (entries: Array<[string, unknown]>): Record<string, unknown> => {
      const o = Object.create(null) as Record<string, unknown>;
      // Without Object.prototype there is no __proto__ setter: this defines an own property.
      for (const [k, v] of entries) o[k] = v;
      return o;
    };
    for (let i = 0; i < MANY; i++) {
      const value = bare([
        [
          'Amount',
          bare([
            ['b', 1],
            ['a', i],
          ]),
        ],
        ['__proto__', bare([['role', 'admin']])],
        [
          'z',
          bare([
            ['d', 1],
            ['c', 2],
          ]),
        ],
      ]);
      expect(Object.keys(value)).toEqual(['Amount', '__proto__', 'z']);
      expect(canonicalize(value)).toBe(
        `{"Amount":{"a":${i},"b":1},"__proto__":{"role":"admin"},"z":{"c":2,"d":1}}`,
      );
      const indexed = bare([
        [
          '1',
          bare([
            ['b', i],
            ['a', 0],
          ]),
        ],
        [
          'B',
          [
            bare([
              ['y', 1],
              ['x', 2],
            ]),
          ],
        ],
        ['__proto__', i],
      ]);
      expect(canonicalize(indexed)).toBe(
        `{"1":{"a":0,"b":${i}},"B":[{"x":2,"y":1}],"__proto__":${i}}`,
      );
    }
  });

  test('args that differ only in __proto__ never share a fingerprint', () => {
    for (let i = 0; i < MANY; i++) {
      const texts = [
        '{"Amount":{"value":10,"currency":"EUR"}}',
        '{"Amount":{"value":10,"currency":"EUR"},"__proto__":{"role":"admin"}}',
        '{"Amount":{"value":10,"currency":"EUR"},"__proto__":{"role":"user"}}',
        '{"Amount":{"value":10,"currency":"EUR"},"__proto__":null}',
      ];
      const prints = texts.map((text) => fingerprint(JSON.parse(text)));
      expect(new Set(prints).size).toBe(texts.length);
      expect(texts.map((text) => fingerprint(JSON.parse(text)))).toEqual(prints);
    }
  });

  test('differential fuzz against an independent RFC 8785 reference, on shapes repeated past the compile threshold', async () => {
    // A fresh module instance (empty shape cache) and a spy on the Function constructor, to see
    // that copiers were compiled (and so the compiled fast path ran, not only the generic loop).
    vi.resetModules();
    const fresh = await import('./canonicalize.js');
    let compiled = 0;
    const original = globalThis.Function;
    globalThis.Function = new Proxy(original, {
      construct(target, args: string[]) {
        compiled++;
        return Reflect.construct(target, args) as object;
      },
    });
    // The first call of a shape is a miss and copiers are compiled after 256 hits: 300 calls of
    // one shape run its compiled copier (where it gets one) dozens of times.
    const REPEAT = 300;
    // Leaf values cycle through this many variants (the shapes stay the same).
    const VARIANTS = 6;
    type Template =
      | { readonly kind: 'number' | 'string' | 'boolean' | 'null' }
      | { readonly kind: 'array'; readonly items: readonly Template[] }
      | {
          readonly kind: 'object';
          readonly bare: boolean;
          readonly entries: readonly (readonly [string, Template])[];
        };
    // Keys that sort before "__proto__" (U+005F), keys that sort after it, arbitrary keys. An
    // object that needs reordering and has an integer-like key sends the whole value to the
    // slow path, so two thirds of the templates have none: the fast path must be what runs.
    const keys = (integers: boolean) =>
      fc.oneof(
        {
          weight: 5,
          arbitrary: fc.constantFrom(
            ...(integers ? ['0', '10', '9', '1'] : []),
            '',
            '$',
            '-',
            'A',
            'Amount',
            'B',
            'Z',
          ),
        },
        {
          weight: 3,
          arbitrary: fc.constantFrom(
            'a',
            'b',
            'z',
            'é',
            'ü',
            '\uffff',
            '\u{1f600}', // \ud83d\ude00: before U+FFFF by code units, after it by code points
            '\u{10000}',
            'toJSON',
            'constructor',
          ),
        },
        {
          weight: 1,
          arbitrary: fc
            .string({ unit: 'binary', maxLength: 4 })
            .filter((k) => k !== '__proto__' && (integers || !/^[0-9]/.test(k))),
        },
      );
    const order = fc.constantFrom('as drawn', 'sorted', 'reversed');
    const templates = (integers: boolean) =>
      fc.letrec<{ node: Template; object: Template }>((tie) => ({
        node: fc.oneof(
          { maxDepth: 3, depthSize: 'small' },
          {
            weight: 2,
            arbitrary: fc
              .constantFrom('number', 'string', 'boolean', 'null')
              .map((kind): Template => ({ kind })),
          },
          {
            weight: 1,
            arbitrary: fc
              .array(tie('node'), { maxLength: 3 })
              .map((items): Template => ({ kind: 'array', items })),
          },
          { weight: 2, arbitrary: tie('object') },
        ),
        object: fc
          .record({
            bare: fc.boolean(), // Object.create(null)
            order,
            entries: fc.uniqueArray(fc.tuple(keys(integers), tie('node')), {
              selector: ([k]) => k,
              maxLength: 5,
            }),
            // A third of the objects get an own __proto__, mostly in already sorted objects
            // (copied in place when an earlier child changes), at any position otherwise.
            proto: fc.oneof(
              { weight: 2, arbitrary: fc.constant(undefined) },
              { weight: 1, arbitrary: tie('node') },
            ),
            protoSorted: fc.oneof(
              { weight: 3, arbitrary: fc.constant(true) },
              { weight: 1, arbitrary: fc.constant(false) },
            ),
            at: fc.nat(),
          })
          .map(({ bare, order, entries: drawn, proto, protoSorted, at }): Template => {
            const entries = [...drawn];
            if (proto !== undefined)
              entries.splice(at % (entries.length + 1), 0, ['__proto__', proto]);
            const how = proto !== undefined && protoSorted ? 'sorted' : order;
            const sorted = [...entries].sort(([a], [b]) => compareUtf16(a, b));
            const ordered =
              how === 'sorted' ? sorted : how === 'reversed' ? sorted.reverse() : entries;
            return { kind: 'object', bare, entries: ordered };
          }),
      })).object;
    const object = fc.oneof(
      { weight: 2, arbitrary: templates(false) },
      { weight: 1, arbitrary: templates(true) },
    );
    const build = (t: Template, v: number): unknown => {
      switch (t.kind) {
        case 'number':
          return [v, -v / 7, v * 1e21, 5e-324 * v, -0, 0.1 + v][v];
        case 'string':
          return `s${v}é😀\n"\u2028`;
        case 'boolean':
          return v % 2 === 0;
        case 'null':
          return null;
        case 'array':
          return t.items.map((item) => build(item, v));
        case 'object': {
          const o: object = t.bare ? Object.create(null) : {};
          // defineProperty, like JSON.parse: an own __proto__ is data, not the prototype.
          for (const [k, item] of t.entries) {
            Object.defineProperty(o, k, {
              value: build(item, v),
              enumerable: true,
              writable: true,
              configurable: true,
            });
          }
          return o;
        }
      }
    };
    const stats = { proto: 0, integer: 0, bare: 0 };
    const count = (t: Template): void => {
      if (t.kind === 'array') t.items.forEach(count);
      if (t.kind !== 'object') return;
      if (t.bare) stats.bare++;
      for (const [k, item] of t.entries) {
        if (k === '__proto__') stats.proto++;
        if (/^(0|[1-9][0-9]*)$/.test(k)) stats.integer++;
        count(item);
      }
    };
    try {
      fc.assert(
        fc.property(object, (template) => {
          count(template);
          const values = Array.from({ length: VARIANTS }, (_, v) => build(template, v));
          const texts = values.map((value) => JSON.stringify(value));
          const expected = values.map(rfc8785);
          for (let i = 0; i < REPEAT; i++) {
            const v = i % VARIANTS;
            // Every other call as model output arrives: JSON.parse of the text (plain objects).
            const input = i % 2 === 0 ? values[v] : JSON.parse(texts[v]!);
            expect(fresh.canonicalize(input)).toBe(expected[v]);
          }
        }),
        { numRuns: 300 },
      );
    } finally {
      globalThis.Function = original;
    }
    // The generator really produced the cases this is about, and copiers were compiled.
    expect(stats.proto).toBeGreaterThan(50);
    expect(stats.integer).toBeGreaterThan(50);
    expect(stats.bare).toBeGreaterThan(50);
    expect(compiled).toBeGreaterThan(20);
  });
});

describe('numbers', () => {
  test.each([
    [0, '0'],
    [-0, '0'],
    [1, '1'],
    [-1.5, '-1.5'],
    [4.5, '4.5'],
    [0.002, '0.002'],
    [333333333.3333333, '333333333.3333333'],
    [1e21, '1e+21'],
    [1e30, '1e+30'],
    [999999999999999900000, '999999999999999900000'],
    [0.000001, '0.000001'],
    [1e-7, '1e-7'],
    [1e-27, '1e-27'],
    [5e-324, '5e-324'],
    [-5e-324, '-5e-324'],
    [1.7976931348623157e308, '1.7976931348623157e+308'],
    [Number('9007199254740993'), '9007199254740992'],
    [295147905179352830000, '295147905179352830000'],
    [0.1 + 0.2, '0.30000000000000004'],
  ])('%d -> %s', (value, expected) => {
    expect(canonicalize(value)).toBe(expected);
    expect(canonicalize([value])).toBe(`[${expected}]`);
    expect(canonicalize({ n: value })).toBe(`{"n":${expected}}`);
  });

  test('IEEE-754 samples from the vectors README', () => {
    const samples: [string, string][] = [
      ['4340000000000001', '9007199254740994'],
      ['4340000000000002', '9007199254740996'],
      ['444b1ae4d6e2ef50', '1e+21'],
      ['3eb0c6f7a0b5ed8d', '0.000001'],
      ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
      ['8000000000000000', '0'],
      ['0', '0'],
    ];
    const view = new DataView(new ArrayBuffer(8));
    for (const [bits, expected] of samples) {
      view.setBigUint64(0, BigInt(`0x${bits}`));
      expect(canonicalize(view.getFloat64(0))).toBe(expected);
    }
  });

  test('every finite double serializes like ES Number::toString', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (n) => {
        const expected = Object.is(n, -0) ? '0' : String(n);
        expect(canonicalize(n)).toBe(expected);
        expect(canonicalize({ b: n, a: [n] })).toBe(`{"a":[${expected}],"b":${expected}}`);
      }),
    );
  });
});

describe('JSON.stringify semantics', () => {
  test('undefined properties are omitted, undefined items and holes become null', () => {
    expect(canonicalize({ b: undefined, a: 1, c: undefined })).toBe('{"a":1}');
    expect(canonicalize({ a: undefined })).toBe('{}');
    expect(canonicalize([undefined, 1])).toBe('[null,1]');
    // biome-ignore lint/suspicious/noSparseArray: the hole is the point of the test
    expect(canonicalize([1, , 3])).toBe('[1,null,3]');
    expect(canonicalize(new Array(2))).toBe('[null,null]');
  });

  test('toJSON is honoured, with the property name or index as its argument', () => {
    expect(canonicalize({ when: new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 6)) })).toBe(
      '{"when":"2025-01-02T03:04:05.006Z"}',
    );
    expect(canonicalize(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
    expect(canonicalize({ bad: new Date(Number.NaN) })).toBe('{"bad":null}');
    const echo = { toJSON: (key: string) => `key:${key}` };
    expect(canonicalize(echo)).toBe('"key:"');
    expect(canonicalize({ x: echo, y: [echo, echo] })).toBe('{"x":"key:x","y":["key:0","key:1"]}');
    expect(canonicalize({ a: { toJSON: () => ({ z: 1, y: [2, { d: 4, c: 3 }] }) } })).toBe(
      '{"a":{"y":[2,{"c":3,"d":4}],"z":1}}',
    );
    expect(canonicalize({ a: { toJSON: () => undefined }, b: 1 })).toBe('{"b":1}');
    expect(canonicalize([{ toJSON: () => undefined }])).toBe('[null]');
    const hidden = { b: 1, a: 2 };
    Object.defineProperty(hidden, 'toJSON', { value: () => 'hidden', enumerable: false });
    expect(canonicalize({ v: hidden })).toBe('{"v":"hidden"}');
    class Money {
      constructor(
        readonly amount: number,
        readonly currency: string,
      ) {}
      toJSON() {
        return { currency: this.currency, amount: this.amount };
      }
    }
    expect(canonicalize({ price: new Money(12.5, 'EUR') })).toBe(
      '{"price":{"amount":12.5,"currency":"EUR"}}',
    );
  });

  test('boxed primitives are unwrapped', () => {
    expect(
      canonicalize({ n: Object(1.5), s: Object('x"y'), t: Object(true), f: Object(false) }),
    ).toBe('{"f":false,"n":1.5,"s":"x\\"y","t":true}');
    expect(canonicalize([Object(-0)])).toBe('[0]');
  });

  test('getters are read, also when they change the object', () => {
    expect(
      canonicalize({
        z: 1,
        get y() {
          return [2];
        },
      }),
    ).toBe('{"y":[2],"z":1}');
    const mutating: Record<string, unknown> = {
      get a() {
        delete mutating.b;
        return 1;
      },
      b: 2,
      c: 3,
    };
    // Same as JSON.stringify: b is gone by the time it would be read.
    expect(canonicalize(mutating)).toBe('{"a":1,"c":3}');
  });

  test('symbol-keyed and non-enumerable properties are ignored', () => {
    const value: Record<string | symbol, unknown> = { b: 1, [Symbol('s')]: 2 };
    Object.defineProperty(value, 'a', { value: 3, enumerable: false });
    expect(canonicalize(value)).toBe('{"b":1}');
  });

  test('class instances, null-prototype objects and shared references', () => {
    class Point {
      constructor(
        readonly y: number,
        readonly x: number,
      ) {}
    }
    expect(canonicalize({ p: new Point(2, 1) })).toBe('{"p":{"x":1,"y":2}}');
    const bare = Object.assign(Object.create(null) as object, { b: 1, a: 2 });
    expect(canonicalize(bare)).toBe('{"a":2,"b":1}');
    const shared = { y: 1, x: 2 };
    expect(canonicalize({ a: shared, b: [shared, shared] })).toBe(
      '{"a":{"x":2,"y":1},"b":[{"x":2,"y":1},{"x":2,"y":1}]}',
    );
  });

  test('strings use the minimal JSON escapes and keep everything else as is', () => {
    expect(canonicalize('\u0000\u001f\b\t\n\f\r"\\/\u007f\u2028é😀')).toBe(
      '"\\u0000\\u001f\\b\\t\\n\\f\\r\\"\\\\/\u007f\u2028é😀"',
    );
    expect(canonicalize({ 'a"b': 1, 'a\nb': 2 })).toBe('{"a\\nb":2,"a\\"b":1}');
  });

  test('literal backslash-u-d text is data, not a surrogate escape', () => {
    expect(canonicalize({ b: '\\ud800', a: '\\uDC00' })).toBe('{"a":"\\\\uDC00","b":"\\\\ud800"}');
    expect(canonicalize({ '\\ud83d': 1 })).toBe('{"\\\\ud83d":1}');
  });

  test('top-level primitives and nesting deeper than the fast path handles', () => {
    expect(canonicalize(null)).toBe('null');
    expect(canonicalize(true)).toBe('true');
    expect(canonicalize('x')).toBe('"x"');
    let deep: unknown = { b: 1, a: 2 };
    for (let i = 0; i < 500; i++) deep = i % 2 ? [deep] : { k: deep };
    expect(canonicalize(deep)).toBe(reference(deep));
  });
});

describe('rejections', () => {
  test('BigInt, also inside arrays, boxed, or with a toJSON polyfill', () => {
    expectInvalid(1n, 'args is a BigInt', 'pass it as a string or number');
    expectInvalid({ items: [{}, {}, { price: 10n }] }, 'args.items[2].price is a BigInt');
    expectInvalid({ a: Object(1n) }, 'args.a is a BigInt');
    const proto = BigInt.prototype as { toJSON?: () => string };
    proto.toJSON = function (this: bigint) {
      return this.toString();
    };
    try {
      expectInvalid({ a: 1n }, 'args.a is a BigInt');
    } finally {
      delete proto.toJSON;
    }
  });

  test('NaN and infinities', () => {
    expectInvalid(Number.NaN, 'args is NaN', 'finite number');
    expectInvalid({ a: { b: Number.POSITIVE_INFINITY } }, 'args.a.b is Infinity');
    expectInvalid([0, Number.NEGATIVE_INFINITY], 'args[1] is -Infinity');
    expectInvalid({ n: Object(Number.NaN) }, 'args.n is NaN');
    expectInvalid({ d: { toJSON: () => Number.NaN } }, 'args.d is NaN');
  });

  test('cycles, but not shared references', () => {
    const self: Record<string, unknown> = { x: 1 };
    self.self = self;
    expectInvalid(self, 'args.self is a circular reference', 'points back to args)', 'a tree');
    const a: Record<string, unknown> = { name: 'a' };
    const b = { parent: a };
    a.children = [b];
    expectInvalid(
      { root: a },
      'args.root.children[0].parent is a circular reference',
      'args.root)',
    );
    const list: unknown[] = [];
    list.push({ list });
    expectInvalid(list, 'args[0].list is a circular reference');
    const shared = { v: 1 };
    expect(canonicalize([shared, { shared }])).toBe('[{"v":1},{"shared":{"v":1}}]');
  });

  test('functions and symbols as values', () => {
    expectInvalid({ cb: () => 1 }, 'args.cb is a function', 'pass data');
    expectInvalid([1, () => 1], 'args[1] is a function');
    expectInvalid({ 'content-type': Symbol('x') }, 'args["content-type"] is a symbol');
    expectInvalid({ s: Object(Symbol('x')) }, 'args.s is a symbol');
    expectInvalid(() => 1, 'args is a function');
  });

  test('lone surrogates in strings and property names', () => {
    expectInvalid({ note: 'ok \ud83d' }, 'args.note is a string with a lone surrogate', '\\ud83d');
    expectInvalid(['\ude00x'], 'args[0] is a string with a lone surrogate (\\ude00 at index 0)');
    expectInvalid(
      { a: { 'x\ud800': 1 } },
      'args.a has a property name "x\\ud800"',
      'lone surrogate',
    );
    expectInvalid('\udc00\ud800', 'args is a string with a lone surrogate (\\udc00 at index 0)');
    expectInvalid({ d: { toJSON: () => '\ud800' } }, 'args.d is a string with a lone surrogate');
  });

  test('Map, Set, WeakMap, WeakSet', () => {
    expectInvalid({ m: new Map([['a', 1]]) }, 'args.m is a Map', 'Object.fromEntries');
    expectInvalid({ s: new Set([1]) }, 'args.s is a Set', '[...set]');
    expectInvalid([new WeakMap()], 'args[0] is a WeakMap');
    expectInvalid({ w: new WeakSet() }, 'args.w is a WeakSet');
  });

  test('top-level undefined', () => {
    expectInvalid(undefined, 'args is undefined', '{}');
    expectInvalid({ toJSON: () => undefined }, 'args serializes to nothing');
  });

  test('nesting deeper than 1000 levels', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1100; i++) deep = [deep];
    expectInvalid(deep, 'nested more than 1000 levels deep');
  });
});

describe('sha256 and fingerprint', () => {
  test('known digests, base64url without padding', () => {
    expect(sha256('')).toBe('47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU');
    expect(sha256('abc')).toBe('ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0');
  });

  test('hashes the UTF-8 bytes', () => {
    const text = 'é€😀';
    expect(sha256(text)).toBe(
      createHash('sha256').update(Buffer.from(text, 'utf8')).digest('base64url'),
    );
  });

  test('fingerprint = sha256(canonicalize)', () => {
    expect(fingerprint({ b: 1, a: [true, null] })).toBe(sha256('{"a":[true,null],"b":1}'));
    expect(fingerprint({ a: 1, b: 2 })).toBe(fingerprint({ b: 2, a: 1 }));
  });
});

describe('properties', () => {
  test('matches an independent reference on JSON values', () => {
    fc.assert(
      fc.property(unicodeJson, (value) => {
        expect(canonicalize(value)).toBe(reference(value));
      }),
    );
  });

  test('is idempotent', () => {
    fc.assert(
      fc.property(unicodeJson, (value) => {
        const once = canonicalize(value);
        expect(canonicalize(JSON.parse(once))).toBe(once);
      }),
    );
  });

  test('does not depend on the key order of the input', () => {
    fc.assert(
      fc.property(unicodeJson, fc.infiniteStream(fc.nat()), (value, stream) => {
        const iterator = stream[Symbol.iterator]();
        const next = () => iterator.next().value as number;
        const expected = reference(value);
        const shuffled = shuffleKeys(value, next);
        // Twice each: the first call sees new shapes, the second finds them in the shape cache.
        for (let i = 0; i < 2; i++) {
          expect(canonicalize(shuffled)).toBe(expected);
          expect(canonicalize(value)).toBe(expected);
        }
      }),
    );
  });

  test('round-trips JSON values', () => {
    fc.assert(
      fc.property(unicodeJson, (value) => {
        expect(JSON.parse(canonicalize(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  test('output is compact and sorted at every level', () => {
    fc.assert(
      fc.property(unicodeJson, (value) => {
        expectSortedEverywhere(parseOrdered(canonicalize(value)));
      }),
    );
  });

  test('full-Unicode strings round-trip as values and keys', () => {
    const text = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'grapheme-composite' }),
    );
    fc.assert(
      fc.property(text, text, (key, value) => {
        expect(JSON.parse(canonicalize(value))).toBe(value);
        const parsed = JSON.parse(canonicalize({ [key]: value, z: [value] })) as Record<
          string,
          unknown
        >;
        expect(parsed[key]).toBe(key === 'z' ? [value] : value);
        expect(Buffer.from(canonicalize(value), 'utf8').toString('utf8')).toBe(canonicalize(value));
      }),
    );
  });

  test('a lone surrogate anywhere throws InvalidInputError', () => {
    fc.assert(
      fc.property(
        unicodeJson,
        fc.string({ unit: 'binary' }),
        loneSurrogate,
        fc.nat(),
        fc.boolean(),
        (value, text, unit, position, asKey) => {
          const at = position % (text.length + 1);
          const bad = `${text.slice(0, at)}${String.fromCharCode(unit)}${text.slice(at)}`;
          // A low surrogate right after a high one (or vice versa) would form a valid pair.
          fc.pre(!bad.isWellFormed());
          const injected = asKey ? { [bad]: 1 } : bad;
          expectInvalid({ data: value, x: [injected] }, 'args.x[0]', 'lone surrogate');
        },
      ),
    );
  });

  test('the slow path (taken for boxed primitives) agrees with the fast path', () => {
    fc.assert(
      fc.property(unicodeJson, (value) => {
        expect(canonicalize({ v: value, boxed: Object(1) })).toBe(
          canonicalize({ v: value, boxed: 1 }),
        );
      }),
    );
  });
});
