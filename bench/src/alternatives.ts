/**
 * Implementations of RFC 8785 canonicalization that @idempotent-tools/core did NOT pick, kept so
 * the benchmark shows why. They handle plain JSON data only (enough for the bench payloads) and
 * throw on what the real one rejects; the bench checks their output against the real one.
 */

const NOT_JSON = 'not JSON';

function checkNumber(n: number): string {
  if (!Number.isFinite(n)) throw new TypeError(NOT_JSON);
  return JSON.stringify(n);
}

function quoteChecked(text: string): string {
  if (!text.isWellFormed()) throw new TypeError(NOT_JSON);
  return JSON.stringify(text);
}

/** 1. Naive: recursive, `Object.keys().sort()`, map/join, JSON.stringify for every scalar. */
export function naive(value: unknown): string {
  if (typeof value === 'string') return quoteChecked(value);
  if (typeof value === 'number') return checkNumber(value);
  if (typeof value === 'boolean' || value === null) return String(value);
  if (Array.isArray(value)) {
    return `[${value.map((item) => (item === undefined ? 'null' : naive(item))).join(',')}]`;
  }
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .filter((k) => record[k] !== undefined)
      .map((k) => `${quoteChecked(k)}:${naive(record[k])}`)
      .join(',')}}`;
  }
  throw new TypeError(NOT_JSON);
}

// 2. Tuned recursive serializer: string concatenation, keys sorted in place by insertion sort
// (after an is-it-sorted check), quoting only the strings a regex says need escaping, a cache of
// quoted keys.
// biome-ignore lint/suspicious/noControlCharactersInRegex: JSON escapes exactly these
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;
const quotedKeys = new Map<string, string>();

function quote(text: string): string {
  if (!NEEDS_ESCAPE.test(text)) return `"${text}"`;
  return quoteChecked(text);
}

function quoteKey(key: string): string {
  let quoted = quotedKeys.get(key);
  if (quoted === undefined) {
    quoted = `${quote(key)}:`;
    if (quotedKeys.size > 4096) quotedKeys.clear();
    quotedKeys.set(key, quoted);
  }
  return quoted;
}

function concatValue(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      if (value - value !== 0) throw new TypeError(NOT_JSON);
      return `${value}`;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return undefined;
    case 'object':
      if (value === null) return 'null';
      return Array.isArray(value) ? concatArray(value) : concatObject(value);
    default:
      throw new TypeError(NOT_JSON);
  }
}

function concatArray(value: readonly unknown[]): string {
  let out = '[';
  for (let i = 0; i < value.length; i++) {
    if (i > 0) out += ',';
    out += concatValue(value[i]) ?? 'null';
  }
  return `${out}]`;
}

function concatObject(value: object): string {
  const keys = Object.keys(value);
  const values = Object.values(value) as unknown[];
  const n = keys.length;
  let i = 1;
  while (i < n && keys[i - 1]! < keys[i]!) i++;
  for (; i < n; i++) {
    const k = keys[i]!;
    const v = values[i];
    let j = i - 1;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      values[j + 1] = values[j];
      j--;
    }
    keys[j + 1] = k;
    values[j + 1] = v;
  }
  let out = '{';
  let first = true;
  for (let m = 0; m < n; m++) {
    const item = concatValue(values[m]);
    if (item === undefined) continue;
    out += first ? quoteKey(keys[m]!) + item : `,${quoteKey(keys[m]!)}${item}`;
    first = false;
  }
  return `${out}}`;
}

export function concat(value: unknown): string {
  const text = concatValue(value);
  if (text === undefined) throw new TypeError(NOT_JSON);
  return text;
}

// 3. Allowlist: one validating walk collects every key, then native
// JSON.stringify(value, sortedKeys) emits each object's properties in that global order.
function collect(value: unknown, keys: Set<string>): void {
  if (typeof value === 'number') {
    if (value - value !== 0) throw new TypeError(NOT_JSON);
  } else if (typeof value === 'object' && value !== null) {
    if (Array.isArray(value)) {
      for (const item of value) collect(item, keys);
    } else {
      const record = value as Record<string, unknown>;
      for (const k of Object.keys(record)) {
        keys.add(k);
        collect(record[k], keys);
      }
    }
  } else if (
    typeof value !== 'string' &&
    typeof value !== 'boolean' &&
    value !== undefined &&
    value !== null
  ) {
    throw new TypeError(NOT_JSON);
  }
}

export function allowlist(value: unknown): string {
  const set = new Set<string>();
  collect(value, set);
  const keys = [...set].sort();
  for (const k of keys) if (k in Object.prototype) throw new TypeError('unsupported key');
  const text = JSON.stringify(value, keys);
  if (text.includes('\\ud')) throw new TypeError(NOT_JSON);
  return text;
}
