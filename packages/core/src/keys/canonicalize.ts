import { InvalidInputError } from '../errors/index.js';
import { brands, sha256Base64url } from '../runtime/index.js';

/**
 * RFC 8785 (JSON Canonicalization Scheme) canonical JSON text of `value`.
 *
 * Object properties are sorted by their UTF-16 code units, there is no whitespace, strings use
 * the minimal JSON escapes and numbers use the ECMAScript Number-to-string form (what
 * `JSON.stringify` emits for finite numbers, so `1.0` is `1`, `1e21` is `1e+21`, `-0` is `0`).
 *
 * The value is read with `JSON.stringify` semantics:
 * - own enumerable string-keyed properties only; symbol-keyed properties are ignored;
 * - object properties whose value is `undefined` are omitted;
 * - array items that are `undefined`, and holes of sparse arrays, become `null`;
 * - `toJSON(key)` is honoured (a `Date` becomes its ISO string, an invalid `Date` becomes
 *   `null`); it and getters may be called more than once, so they must be pure;
 * - boxed primitives (`new Number(1)`, `new String('a')`, `new Boolean(true)`) are unwrapped;
 * - shared (non-cyclic) references are serialised once per occurrence.
 *
 * Unlike `JSON.stringify`, which silently drops or mangles them, these throw an
 * {@link InvalidInputError} (field `args`) whose message names the JSON path
 * (e.g. `args.items[2].price`) and the fix: BigInt (even with a `BigInt.prototype.toJSON`),
 * `NaN`, `Infinity`, `-Infinity`, functions, symbols (as values), cycles, strings or property
 * names containing a lone surrogate (not encodable as UTF-8), `Map`, `Set`, `WeakMap`,
 * `WeakSet` (`JSON.stringify` turns them into `{}`), a top-level `undefined` (or a top-level
 * `toJSON` returning it) and nesting deeper than 1000 levels.
 */
export function canonicalize(value: unknown): string {
  if (typeof value !== 'object' || value === null) return canonicalizePrimitive(value);
  let copy: unknown;
  try {
    copy = walk(value, '', 0);
  } catch (error) {
    if (error === BAIL) return canonicalizeSlow(value);
    throw error;
  }
  // undefined: a top-level toJSON returned nothing; the slow path throws the error.
  if (copy === undefined) return canonicalizeSlow(value);
  const text = JSON.stringify(copy);
  // JSON.stringify escapes a lone surrogate as \udXXX. The slow path tells a real one (error with
  // its path) from a literal backslash followed by "ud" in the data (same output, just slower).
  if (text.includes('\\ud')) return canonicalizeSlow(value);
  return text;
}

/** SHA-256 of the UTF-8 bytes of `text`, base64url without padding (43 characters). */
export function sha256(text: string): string {
  return sha256Base64url(text);
}

/** `sha256(canonicalize(value))`: the fingerprint of a JSON value. */
export function fingerprint(value: unknown): string {
  return sha256(canonicalize(value));
}

// ---------------------------------------------------------------------------------------------
// Fast path.
//
// One validating walk builds a copy of the value in which every object that was not already in
// canonical key order is replaced by a fresh object whose properties were inserted in sorted
// order (and toJSON results are substituted); untouched subtrees are shared with the input.
// Native JSON.stringify then emits properties in insertion order, escapes strings and formats
// numbers exactly as RFC 8785 wants. Objects are only reordered when no key is an array index
// (JS engines enumerate those first, in numeric order). An object with an own `__proto__` key
// (`JSON.parse` makes one from model output) is copied into a null-prototype object, where
// `copy.__proto__ = v` defines a property: on a plain `{}` it would set the copy's prototype and
// the key would vanish from the text (two args, one key: a wrong replay). The input is never
// modified and never rebuilt by sorting (no `Object.fromEntries(sorted entries)`).
//
// A shape that keeps coming back (the same tool's arguments, call after call) gets a copier
// compiled for it with `new Function` (see `compile`): it reads the properties by name, validates
// them inline and returns an object literal in canonical order, so it needs neither
// `Object.values` nor property-by-property insertion into an empty object. Where code generation
// from strings is forbidden, the generic loop is used.
//
// Measured in bench/ against a tuned recursive string-concatenating serializer, the `JSON.stringify
// (value, allKeysSorted)` allowlist trick and the `canonicalize` npm package: building strings in
// JS (and flattening the resulting rope when hashing) costs more than building the copy, and a
// property allowlist makes V8 look up every listed key on every object. With SHA-256 on top, the
// ~1 KB payload costs ~1.2x `JSON.stringify` + SHA-256 (1.33x without compiled copiers); what is
// left is `JSON.stringify` itself on the copy, `Object.keys` and the per-object checks. (The
// `includes('\\ud')` scan looks expensive alone because it flattens the rope `JSON.stringify`
// returns, but hashing would flatten it anyway.)
//
// Anything unusual (a problem to report, a class instance, a boxed primitive, an array-index
// key, deep nesting) throws BAIL and the whole value goes through the slow path below, which
// produces the same text or the precise error.
// ---------------------------------------------------------------------------------------------

const BAIL: unique symbol = Symbol('bail');
const FAST_MAX_DEPTH = 64;
const MAX_DEPTH = 1000;
const OBJECT_PROTOTYPE: unknown = Object.prototype;

// Sorted key orders of recently seen shapes. The slot is picked by a cheap hash of the key list
// and confirmed by comparing the keys; a collision only costs a re-sort. Keys are compared by
// value, so the cache can never change the output.
const SHAPE_SLOTS = 256;
const MAX_CACHED_KEYS = 32;
/** Total characters of a cached shape's keys: the cache never pins big strings. */
const MAX_CACHED_KEY_LENGTH = 512;
interface Shape {
  /** The keys in enumeration order. */
  readonly keys: readonly string[];
  /** The keys in canonical order. */
  readonly sorted: readonly string[];
  /** `sorted[i] === keys[order[i]]`; undefined when the keys are already sorted. */
  readonly order: readonly number[] | undefined;
  /** Whether a key is `__proto__`: copies are then null-prototype objects, never compiled. */
  readonly proto: boolean;
  /** Cache hits so far (only counted for shapes that need reordering). */
  hits: number;
  /** The compiled copier of this shape, once it has been hit `COMPILE_AFTER` times. */
  copier: Copier | undefined;
}

/** Validates the properties of an object of one shape and returns its sorted copy. */
type Copier = (value: object, depth: number) => Record<string, unknown>;

/**
 * Cache hits after which a shape gets a compiled copier. Compiling costs ~25 us (plus a few slow
 * first runs), so only shapes that keep coming back pay for it; with at most one copier per cache
 * slot, at most `SHAPE_SLOTS` copiers are alive.
 */
const COMPILE_AFTER = 256;
/** Cleared for good when the runtime forbids code generation from strings (e.g. a CSP). */
let canCompile = true;
const shapes: (Shape | undefined)[] = new Array(SHAPE_SLOTS).fill(undefined);

type Key = string | number;

function walk(value: object, key: Key, depth: number): unknown {
  if (depth > FAST_MAX_DEPTH) throw BAIL;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    return checkPrimitive((value as { toJSON(key: string): unknown }).toJSON(String(key)));
  }
  if (Array.isArray(value)) return walkArray(value, depth);
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== OBJECT_PROTOTYPE && proto !== null) throw BAIL;
  const keys = Object.keys(value);
  const n = keys.length;
  const shape = shapeOf(keys, n);
  const known = shapeHit;
  const sorted = shape.sorted;
  const order = shape.order;
  if (order !== undefined && known) {
    const copier = shape.copier;
    if (copier !== undefined) return copier(value, depth);
    if (++shape.hits === COMPILE_AFTER && canCompile) shape.copier = compile(sorted);
  }
  const values = Object.values(value) as unknown[];
  // A getter that adds or deletes properties could misalign the two lists.
  if (values.length !== n) throw BAIL;
  let copy: Record<string, unknown> | undefined =
    order === undefined ? undefined : newObject(known, shape);
  for (let i = 0; i < n; i++) {
    const x = values[order === undefined ? i : order[i]!];
    let y = x;
    if (typeof x === 'object') {
      if (x !== null) y = walk(x, sorted[i]!, depth + 1);
    } else if (typeof x === 'number') {
      if (x - x !== 0) throw BAIL; // NaN, +/-Infinity
    } else if (typeof x !== 'string' && typeof x !== 'boolean' && x !== undefined) {
      throw BAIL; // bigint, function, symbol
    }
    if (copy !== undefined) {
      copy[sorted[i]!] = y;
    } else if (y !== x) {
      // Already sorted, but a child changed: copy in the same (sorted) order.
      copy = newObject(known, shape);
      for (let j = 0; j < i; j++) copy[sorted[j]!] = values[j];
      copy[sorted[i]!] = y;
    }
  }
  return copy === undefined ? value : copy;
}

function walkArray(value: readonly unknown[], depth: number): unknown {
  const n = value.length;
  let copy: unknown[] | undefined;
  for (let i = 0; i < n; i++) {
    const x = value[i];
    let y = x;
    if (typeof x === 'object') {
      if (x !== null) y = walk(x, i, depth + 1);
    } else if (typeof x === 'number') {
      if (x - x !== 0) throw BAIL;
    } else if (typeof x !== 'string' && typeof x !== 'boolean' && x !== undefined) {
      throw BAIL;
    }
    if (copy !== undefined) copy.push(y);
    else if (y !== x) {
      copy = value.slice(0, i);
      copy.push(y);
    }
  }
  return copy === undefined ? value : copy;
}

/**
 * A copier specialised for one shape: it reads the properties by name in canonical order (the
 * order in which the slow path reads them), validates them inline like `walk` does and returns
 * an object literal with the keys in canonical order, which V8 creates with one fixed hidden
 * class. Keys only enter the source as JSON string literals (`JSON.stringify(key)`, valid
 * JavaScript string literals since ES2019), so no key can inject code. Keys that are array
 * indices (an object literal would enumerate them first; `sortShape` refuses them too) or
 * `__proto__` (it would set the prototype; such shapes keep the generic loop, which copies into a
 * null-prototype object) are refused here.
 */
function compile(sorted: readonly string[]): Copier | undefined {
  let body = '';
  let literal = '';
  for (let i = 0; i < sorted.length; i++) {
    const key = sorted[i]!;
    if (key === '__proto__' || DIGIT.test(key)) return undefined;
    const k = JSON.stringify(key);
    body +=
      `let v${i} = o[${k}];\n` +
      `if (typeof v${i} === "object") { if (v${i} !== null) v${i} = walk(v${i}, ${k}, d + 1); }\n` +
      `else if (typeof v${i} === "number") { if (v${i} - v${i} !== 0) throw BAIL; }\n` +
      `else if (typeof v${i} !== "string" && typeof v${i} !== "boolean" && v${i} !== undefined) throw BAIL;\n`;
    literal += `${i === 0 ? '' : ', '}${k}: v${i}`;
  }
  try {
    const factory = new Function(
      'walk',
      'BAIL',
      `"use strict";\nreturn function copy(o, d) {\n${body}return { ${literal} };\n};`,
    ) as (w: typeof walk, bail: typeof BAIL) => Copier;
    return factory(walk, BAIL);
  } catch {
    canCompile = false;
    return undefined;
  }
}

const DIGIT = /^[0-9]/;

/** A toJSON result: primitives are checked here, objects go to the slow path. */
function checkPrimitive(x: unknown): unknown {
  if (typeof x === 'number') {
    if (x - x !== 0) throw BAIL;
  } else if (typeof x !== 'string' && typeof x !== 'boolean' && x !== undefined && x !== null) {
    throw BAIL;
  }
  return x;
}

/**
 * A copy to insert the properties of an object of `shape` into. For a shape seen before, a plain
 * object: V8 keeps the hidden classes of its insertion order, so that is cheapest. For a new
 * shape, a null-prototype (dictionary-mode) object: building never-seen hidden classes costs more
 * than what a plain object saves in JSON.stringify. Both serialize their properties in insertion
 * order. A shape with a `__proto__` key always gets a null-prototype object: with no
 * `Object.prototype` (and so no `__proto__` setter) to inherit, assigning `copy.__proto__` defines
 * an own property, like every other key.
 */
function newObject(known: boolean, shape: Shape): Record<string, unknown> {
  return known && !shape.proto ? {} : (Object.create(null) as Record<string, unknown>);
}

/** Whether the last `shapeOf` call found the shape in the cache. */
let shapeHit = false;

/** The canonical order of `keys` (cached). Sets `shapeHit`. */
function shapeOf(keys: readonly string[], n: number): Shape {
  if (n < 2) {
    shapeHit = true;
    const proto = n === 1 && keys[0] === '__proto__';
    return { keys, sorted: keys, order: undefined, proto, hits: 0, copier: undefined };
  }
  shapeHit = false;
  if (n > MAX_CACHED_KEYS) return sortShape(keys, n);
  const slot =
    (n * 7 + keys[0]!.length * 13 + keys[1]!.charCodeAt(0) * 3 + keys[n - 1]!.charCodeAt(0)) &
    (SHAPE_SLOTS - 1);
  const cached = shapes[slot];
  if (cached !== undefined) {
    const cachedKeys = cached.keys;
    if (cachedKeys.length === n) {
      let i = 0;
      while (i < n && cachedKeys[i] === keys[i]) i++;
      if (i === n) {
        shapeHit = true;
        return cached;
      }
    }
  }
  const shape = sortShape(keys, n);
  let length = 0;
  for (let m = 0; m < n; m++) length += keys[m]!.length;
  if (length <= MAX_CACHED_KEY_LENGTH) shapes[slot] = shape;
  return shape;
}

function sortShape(keys: readonly string[], n: number): Shape {
  let proto = false;
  for (let m = 0; m < n; m++) if (keys[m] === '__proto__') proto = true;
  let i = 1;
  while (i < n && keys[i - 1]! < keys[i]!) i++;
  if (i === n) return { keys, sorted: keys, order: undefined, proto, hits: 0, copier: undefined };
  // Reordering: array-index keys would be enumerated first again. Index keys come first in
  // enumeration order, so checking the first key suffices.
  const first = keys[0]!.charCodeAt(0);
  if (first >= 48 && first <= 57) throw BAIL;
  const order: number[] = [];
  for (let m = 0; m < n; m++) order.push(m);
  if (n > MAX_CACHED_KEYS) {
    // Code-unit comparison, exactly the RFC 8785 order (keys are distinct).
    order.sort((a, b) => (keys[a]! < keys[b]! ? -1 : 1));
  } else {
    for (; i < n; i++) {
      const o = order[i]!;
      const k = keys[o]!;
      let j = i - 1;
      while (j >= 0 && keys[order[j]!]! > k) {
        order[j + 1] = order[j]!;
        j--;
      }
      order[j + 1] = o;
    }
  }
  const sorted = order.map((o) => keys[o]!);
  return { keys, sorted, order, proto, hits: 0, copier: undefined };
}

function canonicalizePrimitive(value: unknown): string {
  switch (typeof value) {
    case 'string':
      if (value.isWellFormed()) return JSON.stringify(value);
      break;
    case 'number':
      if (Number.isFinite(value)) return JSON.stringify(value);
      break;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      break;
  }
  return canonicalizeSlow(value);
}

// ---------------------------------------------------------------------------------------------
// Slow path: a plain recursive serializer that tracks the path and the ancestors, for errors,
// exotic objects and the rare shapes the fast path declines. It never rebuilds objects.
// ---------------------------------------------------------------------------------------------

type Path = Key[];

function canonicalizeSlow(value: unknown): string {
  const text = serialize(value, '', [], []);
  if (text === undefined) {
    const what =
      value === undefined
        ? 'is undefined'
        : 'serializes to nothing (its toJSON returned undefined, a function or a symbol)';
    fail([], `${what}, which is not JSON`, 'pass a JSON value (use {} for no arguments)');
  }
  return text;
}

function serialize(
  input: unknown,
  key: string,
  path: Path,
  ancestors: object[],
): string | undefined {
  let value = input;
  if (typeof value === 'bigint')
    fail(path, 'is a BigInt, which is not JSON', 'pass it as a string or number');
  if (typeof value === 'object' && value !== null) {
    const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  if (typeof value === 'object' && value !== null) {
    if (brands.isNumberObject(value)) value = Number(value);
    else if (brands.isStringObject(value)) value = String(value);
    else if (brands.isBooleanObject(value)) value = value.valueOf();
  }
  switch (typeof value) {
    case 'string':
      checkString(value, path, 'is a string');
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) {
        fail(path, `is ${value}, which is not JSON`, 'pass a finite number (or null, or a string)');
      }
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return undefined;
    case 'bigint':
      return fail(path, 'is a BigInt, which is not JSON', 'pass it as a string or number');
    case 'symbol':
      return fail(path, 'is a symbol, which is not JSON', 'pass a string instead');
    case 'function':
      return fail(path, 'is a function, which is not JSON', 'pass data, not code');
  }
  // Only objects are left; the typeof narrows `unknown` for the compiler.
  if (typeof value !== 'object' || value === null) return 'null';
  checkObject(value, path, ancestors);
  ancestors.push(value);
  let out: string;
  if (Array.isArray(value)) {
    out = '[';
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      const item = serialize(value[i], String(i), path, ancestors);
      path.pop();
      out += `${i === 0 ? '' : ','}${item ?? 'null'}`;
    }
    out += ']';
  } else {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    out = '{';
    let first = true;
    for (const k of keys) {
      if (!k.isWellFormed()) checkString(k, path, `has a property name ${JSON.stringify(k)}`);
      path.push(k);
      const item = serialize(record[k], k, path, ancestors);
      path.pop();
      if (item === undefined) continue;
      out += `${first ? '' : ','}${JSON.stringify(k)}:${item}`;
      first = false;
    }
    out += '}';
  }
  ancestors.pop();
  return out;
}

function checkString(text: string, path: Path, what: string): void {
  if (text.isWellFormed()) return;
  let at = 0;
  while (at < text.length) {
    const unit = text.charCodeAt(at);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(at + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        at += 2;
        continue;
      }
      break;
    }
    if (unit >= 0xdc00 && unit <= 0xdfff) break;
    at++;
  }
  const unit = text.charCodeAt(at).toString(16);
  fail(
    path,
    `${what} with a lone surrogate (\\u${unit} at index ${at}), which is not valid Unicode and cannot be encoded as UTF-8`,
    'pass well-formed text (e.g. do not cut strings in the middle of an emoji; String.prototype.toWellFormed() replaces lone surrogates)',
  );
}

function checkObject(value: object, path: Path, ancestors: object[]): void {
  if (brands.isMap(value)) {
    fail(
      path,
      'is a Map, which JSON.stringify would turn into {}',
      'pass a plain object instead (Object.fromEntries(map))',
    );
  }
  if (brands.isSet(value)) {
    fail(
      path,
      'is a Set, which JSON.stringify would turn into {}',
      'pass an array instead ([...set])',
    );
  }
  if (brands.isWeakMap(value) || brands.isWeakSet(value)) {
    const kind = brands.isWeakMap(value) ? 'WeakMap' : 'WeakSet';
    fail(path, `is a ${kind}, which JSON.stringify would turn into {}`, 'pass plain data instead');
  }
  if (brands.isBigIntObject(value))
    fail(path, 'is a BigInt, which is not JSON', 'pass it as a string or number');
  if (brands.isSymbolObject(value))
    fail(path, 'is a symbol, which is not JSON', 'pass a string instead');
  const index = ancestors.indexOf(value);
  if (index !== -1) {
    fail(
      path,
      `is a circular reference (it points back to ${formatPath(path.slice(0, index))}), which JSON cannot represent`,
      'pass a tree (drop the back-reference, or refer to the object by an id)',
    );
  }
  if (ancestors.length >= MAX_DEPTH) {
    fail(path, `is nested more than ${MAX_DEPTH} levels deep`, 'pass flatter data');
  }
}

function fail(path: Path, problem: string, fix: string): never {
  throw new InvalidInputError({
    field: 'args',
    message: `${formatPath(path)} ${problem}: ${fix}.`,
  });
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** `args.items[2].price`, `args["content-type"]`. */
function formatPath(path: Path): string {
  let out = 'args';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) out += `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}
