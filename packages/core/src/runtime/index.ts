/**
 * What core needs of the JavaScript runtime, chosen once when the module loads: Node's own
 * modules where the runtime has them (`process.getBuiltinModule`: Node >= 22.3, Deno, Bun, and
 * Cloudflare Workers with `nodejs_compat`), portable code everywhere else (Workers without
 * `nodejs_compat`, the Vercel Edge runtime, a browser). No module of core imports `node:*`
 * statically, so core loads on every runtime; on Node the native path is kept (the same
 * functions, measured in bench/).
 */
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';

type NodeCrypto = typeof import('node:crypto');
type NodeUtil = typeof import('node:util');
type NodeHooks = typeof import('node:async_hooks');

type Process = {
  getBuiltinModule?: (id: string) => unknown;
  versions?: Record<string, string | undefined>;
};
const process_ = (globalThis as { process?: Process }).process;

/** A module of the runtime by its `node:` id, or undefined where the runtime has none. */
export function builtinModule<T>(id: string): T | undefined {
  try {
    return process_?.getBuiltinModule?.(id) as T | undefined;
  } catch {
    return undefined;
  }
}

/** `node:crypto`, where the runtime has it (encryption needs it: see `executor/encryption.ts`). */
export const nodeCrypto = builtinModule<NodeCrypto>('node:crypto');
const nodeUtil = builtinModule<NodeUtil>('node:util');
const nodeHooks = builtinModule<NodeHooks>('node:async_hooks');
const NodeBuffer = (globalThis as { Buffer?: typeof Buffer }).Buffer;

/**
 * Node itself (not Deno, Bun or Workers, whose `process` imitates it): the only runtime whose
 * `fetch` and `node:http` requests the diagnostics channels report (`vendor-calls/sent-requests.ts`).
 */
export const isNode =
  typeof process_?.versions?.node === 'string' &&
  process_.versions.bun === undefined &&
  process_.versions.deno === undefined &&
  (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent !==
    'Cloudflare-Workers' &&
  (globalThis as { EdgeRuntime?: unknown }).EdgeRuntime === undefined;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Bytes as base64 (`url`: base64url without padding). */
export function toBase64(bytes: Uint8Array, url = false): string {
  if (NodeBuffer !== undefined) {
    return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString(
      url ? 'base64url' : 'base64',
    );
  }
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  const text = btoa(binary);
  return url ? text.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '') : text;
}

/**
 * The bytes of base64 or base64url text. Like Node's `Buffer.from(text, 'base64')`, characters
 * outside the alphabet are skipped, never an error (callers check the form first where it matters).
 */
export function fromBase64(text: string): Uint8Array {
  if (NodeBuffer !== undefined) return new Uint8Array(NodeBuffer.from(text, 'base64'));
  const clean = text
    .replace(/-/g, '+')
    .replace(/_/g, '/')
    .replace(/[^A-Za-z0-9+/]/g, '');
  const binary = atob(clean + '='.repeat((4 - (clean.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** The UTF-8 bytes of `text` (a lone surrogate is U+FFFD, as `Buffer` and `TextEncoder` make it). */
export const utf8 = (text: string): Uint8Array => encoder.encode(text);
/** The text of UTF-8 bytes. */
export const fromUtf8 = (bytes: Uint8Array): string => decoder.decode(bytes);

/** The length of `text` in UTF-8 bytes, without encoding it. */
export const utf8Length: (text: string) => number =
  NodeBuffer === undefined
    ? (text) => {
        let bytes = text.length;
        for (let i = 0; i < text.length; i++) {
          const code = text.charCodeAt(i);
          if (code < 0x80) continue;
          if (code < 0x800) bytes += 1;
          else if (
            code >= 0xd800 &&
            code <= 0xdbff &&
            (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00
          ) {
            bytes += 2; // a surrogate pair: 4 bytes for 2 code units
            i++;
          } else bytes += 2; // 3 bytes (a lone surrogate: U+FFFD, 3 bytes too)
        }
        return bytes;
      }
    : (text) => NodeBuffer.byteLength(text, 'utf8');

/** SHA-256 of the UTF-8 bytes of `text`, base64url without padding (43 characters). */
export const sha256Base64url: (text: string) => string =
  typeof nodeCrypto?.hash === 'function'
    ? (text) => (nodeCrypto as NodeCrypto).hash('sha256', text, 'base64url')
    : typeof nodeCrypto?.createHash === 'function'
      ? (text) =>
          (nodeCrypto as NodeCrypto).createHash('sha256').update(text, 'utf8').digest('base64url')
      : (text) => toBase64(nobleSha256(utf8(text)), true);

/** SHA-256 of `bytes`, base64url without padding. */
export const sha256OfBytes: (bytes: Uint8Array) => string =
  typeof nodeCrypto?.createHash === 'function'
    ? (bytes) => (nodeCrypto as NodeCrypto).createHash('sha256').update(bytes).digest('base64url')
    : (bytes) => toBase64(nobleSha256(bytes), true);

/**
 * HMAC-SHA-256 of the UTF-8 bytes of `text` under `secret` (bytes, or on Node a secret
 * `KeyObject`), base64url without padding.
 */
export function hmacSha256(secret: Uint8Array | object): (text: string) => string {
  if (typeof nodeCrypto?.createHmac === 'function') {
    const crypto = nodeCrypto;
    const key = secret instanceof Uint8Array ? (NodeBuffer?.from(secret) ?? secret) : secret;
    return (text) =>
      crypto
        .createHmac('sha256', key as never)
        .update(text)
        .digest('base64url');
  }
  const key = (secret as Uint8Array).slice();
  return (text) => toBase64(hmac(nobleSha256, key, utf8(text)), true);
}

/** Web Crypto, as core uses it. */
type WebCrypto = { randomUUID(): string; getRandomValues<T extends Uint8Array>(array: T): T };
const webCrypto = (globalThis as { crypto?: WebCrypto }).crypto;

/** A random RFC 4122 v4 UUID (Node's cached-entropy one on Node, else Web Crypto's). */
export const randomUUID: () => string =
  typeof nodeCrypto?.randomUUID === 'function'
    ? () => (nodeCrypto as NodeCrypto).randomUUID()
    : () => (webCrypto as WebCrypto).randomUUID();

/** `size` random bytes. */
export const randomBytes = (size: number): Uint8Array =>
  (webCrypto as WebCrypto).getRandomValues(new Uint8Array(size));

/**
 * Brand checks of built-in objects that neither `instanceof` (another realm) nor
 * `Symbol.toStringTag` (anyone can set it) answer reliably: Node's `util.types`, else the same
 * checks made by calling a method of the built-in that only accepts its own kind.
 */
export interface BrandChecks {
  isNumberObject(value: unknown): boolean;
  isStringObject(value: unknown): boolean;
  isBooleanObject(value: unknown): boolean;
  isBigIntObject(value: unknown): boolean;
  isSymbolObject(value: unknown): boolean;
  isMap(value: unknown): boolean;
  isSet(value: unknown): boolean;
  isWeakMap(value: unknown): boolean;
  isWeakSet(value: unknown): boolean;
}

const brandOf =
  (method: (this: unknown, ...args: never[]) => unknown, ...args: unknown[]) =>
  (value: unknown): boolean => {
    if (typeof value !== 'object' || value === null) return false;
    try {
      Reflect.apply(method, value, args);
      return true;
    } catch {
      return false;
    }
  };
const sizeOf = (of: object) =>
  Object.getOwnPropertyDescriptor(of, 'size')?.get as (this: unknown) => unknown;

export const brands: BrandChecks = nodeUtil?.types ?? {
  isNumberObject: brandOf(Number.prototype.valueOf),
  isStringObject: brandOf(String.prototype.valueOf),
  isBooleanObject: brandOf(Boolean.prototype.valueOf),
  isBigIntObject: brandOf(BigInt.prototype.valueOf),
  isSymbolObject: brandOf(Symbol.prototype.valueOf),
  isMap: brandOf(sizeOf(Map.prototype)),
  isSet: brandOf(sizeOf(Set.prototype)),
  isWeakMap: brandOf(WeakMap.prototype.has as never, {}),
  isWeakSet: brandOf(WeakSet.prototype.has as never, {}),
};

/** What core uses of `AsyncLocalStorage`. */
export interface AsyncContext<T> {
  getStore(): T | undefined;
  run<R>(store: T, fn: () => R): R;
  exit<R>(fn: () => R): R;
}

type AsyncContextClass = new <T>() => AsyncContext<T>;
const NativeStorage = (nodeHooks?.AsyncLocalStorage ??
  (globalThis as { AsyncLocalStorage?: AsyncContextClass }).AsyncLocalStorage) as
  | AsyncContextClass
  | undefined;

/**
 * Whether the runtime carries a context across `await` (`AsyncLocalStorage`: Node, Deno, Bun,
 * Workers with `nodejs_compat` or `nodejs_als`, the Vercel Edge runtime). Without it, the
 * execution context is only what a tool is handed (its `ctx`): nothing finds it implicitly.
 */
export const hasAsyncContext = NativeStorage !== undefined;

/**
 * A new async context: `AsyncLocalStorage`, or where the runtime has none, one that holds
 * nothing (`getStore()` is always undefined), so that code looking for the running call finds
 * none and says so, rather than finding another call's.
 */
export function createAsyncContext<T>(): AsyncContext<T> {
  if (NativeStorage !== undefined) return new NativeStorage<T>();
  return { getStore: () => undefined, run: (_store, fn) => fn(), exit: (fn) => fn() };
}
