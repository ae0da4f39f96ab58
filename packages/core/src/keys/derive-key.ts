// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
import type { KeyObject } from 'node:crypto';
import { InvalidInputError } from '../errors/index.js';
import { hmacSha256, utf8Length } from '../runtime/index.js';
import { canonicalize, sha256 } from './canonicalize.js';

/** Version prefix of every key. Bumped only with a new key format (golden vectors pin v1). */
export const KEY_VERSION = 'v1';

/** Limits on key parts. */
export const KEY_LIMITS = {
  toolName: 128,
  turnId: 512,
  scope: 256,
  /** Canonical JSON bytes of a business key. */
  businessKey: 1024,
} as const;

/** @default 1 MiB of canonical JSON */
export const DEFAULT_MAX_ARGS_BYTES = 1024 * 1024;

export interface KeyInput {
  /** The tool's name. 1-128 characters, no control characters. */
  toolName: string;
  /**
   * The conversation turn: the same logical call in the same turn gets the same key. NOT the
   * provider's tool-call id, which is new on every retry. Required unless `businessKey` is given.
   */
  turnId?: string | undefined;
  /** Tenant / user / workspace. Records of one scope are never seen from another. */
  scope?: string | undefined;
  /** The tool's arguments (JSON). Always fingerprinted, also with a business key. */
  args: unknown;
  /**
   * The identity of the operation when the arguments are not (create-or-get by email, an
   * external id). The key is then scope + tool name + business key: the turn is not part of it
   * unless you include it. A repeat with the same business key and other args is drift.
   */
  businessKey?: unknown;
}

export interface DerivedKey {
  /** `v1_` + 43 base64url characters: ASCII, header-safe, fits Redis and SQL keys. */
  key: string;
  /** SHA-256 (base64url) of the canonical args (HMAC-SHA-256 with `argsHmacKey`). */
  fingerprint: string;
}

export interface DeriveKeyOptions {
  /** Largest accepted canonical args, in UTF-8 bytes. @default 1048576 (1 MiB) */
  maxArgsBytes?: number;
  /**
   * A secret of at least 32 bytes: the fingerprint and the key are HMAC-SHA-256 under it instead
   * of plain SHA-256, so someone who reads the store (or the events) cannot confirm a guess of the
   * args or the business key by hashing it. It changes every key and fingerprint (the golden
   * vectors are for the default); every process on a store must use the same one.
   * @default undefined (plain SHA-256)
   */
  argsHmacKey?: Uint8Array | KeyObject | undefined;
}

/** Smallest accepted `argsHmacKey`, in bytes. */
export const MIN_HMAC_KEY_BYTES = 32;

/**
 * The hash of key derivation: SHA-256, or HMAC-SHA-256 under `argsHmacKey`.
 * @throws InvalidInputError (field `argsHmacKey`) on a key that is not bytes or too short.
 * @internal
 */
export function keyHasher(hmacKey: Uint8Array | KeyObject | undefined): (text: string) => string {
  if (hmacKey === undefined) return sha256;
  let size: number;
  if (hmacKey instanceof Uint8Array) {
    size = hmacKey.byteLength;
  } else if (
    hmacKey !== null &&
    typeof hmacKey === 'object' &&
    (hmacKey as KeyObject).type === 'secret'
  ) {
    size = hmacKey.symmetricKeySize ?? 0;
  } else {
    throw new InvalidInputError({
      field: 'argsHmacKey',
      message: 'argsHmacKey must be a Buffer / Uint8Array (or a secret KeyObject) of random bytes.',
    });
  }
  if (size < MIN_HMAC_KEY_BYTES) {
    throw new InvalidInputError({
      field: 'argsHmacKey',
      message: `argsHmacKey is ${size} bytes; use at least ${MIN_HMAC_KEY_BYTES} random bytes (crypto.randomBytes(32)).`,
    });
  }
  return hmacSha256(hmacKey); // a copy: later changes to the caller's buffer change nothing
}

// C0 and C1 control characters.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function checkPart(field: string, value: unknown, max: number, noControl: boolean): string {
  if (typeof value !== 'string') {
    throw new InvalidInputError({
      field,
      message: `${field} must be a string, got ${value === null ? 'null' : typeof value}. Pass a non-empty string of at most ${max} characters.`,
    });
  }
  if (value.length === 0) {
    throw new InvalidInputError({
      field,
      message: `${field} is empty. Pass a non-empty string of at most ${max} characters.`,
    });
  }
  if (value.length > max) {
    throw new InvalidInputError({
      field,
      message: `${field} is ${value.length} characters long; the limit is ${max}. Pass a shorter ${field} (hash a long one yourself).`,
    });
  }
  if (value.includes('\u0000')) {
    throw new InvalidInputError({
      field,
      message: `${field} contains a NUL character (U+0000), which stores such as PostgreSQL cannot keep. Remove it.`,
    });
  }
  if (noControl && CONTROL.test(value)) {
    throw new InvalidInputError({
      field,
      message: `${field} contains a control character. Use printable characters only.`,
    });
  }
  if (!value.isWellFormed()) {
    throw new InvalidInputError({
      field,
      message: `${field} contains a lone surrogate (malformed UTF-16). Pass well-formed text.`,
    });
  }
  return value;
}

function canonicalizeBusinessKey(value: unknown): string {
  try {
    return canonicalize(value);
  } catch (error) {
    if (!InvalidInputError.isInstance(error)) throw error;
    throw new InvalidInputError({
      field: 'businessKey',
      message: error.message.replace(/\bargs\b/, 'businessKey'),
      cause: error,
    });
  }
}

/** Validate a turn id / scope / tool name (typed error otherwise). */
export function validateKeyParts(input: {
  toolName: unknown;
  turnId?: unknown;
  scope?: unknown;
  requireTurnId: boolean;
}): void {
  checkPart('toolName', input.toolName, KEY_LIMITS.toolName, true);
  if (input.turnId !== undefined || input.requireTurnId) {
    if (input.turnId === undefined) {
      throw new InvalidInputError({
        field: 'turnId',
        message:
          'turnId is missing. Pass the id of the conversation turn (e.g. the id of the last user message), not the tool-call id, or give the tool a businessKey.',
      });
    }
    checkPart('turnId', input.turnId, KEY_LIMITS.turnId, false);
  }
  if (input.scope !== undefined) checkPart('scope', input.scope, KEY_LIMITS.scope, false);
}

/**
 * Derive the idempotency key of one tool call (design section 3 (docs/design.md)).
 *
 * The key is `v1_` + base64url(SHA-256(canonical JSON array of the parts)), where the parts are
 * `["idempotent-tools/key", "v1", scope | null, "turn", turnId, toolName, fingerprint]`, or with a
 * business key `["idempotent-tools/key", "v1", scope | null, "business", toolName, businessKey]`.
 * Hashing a canonical array joins the parts unambiguously. Golden vectors pin the output.
 *
 * With `argsHmacKey`, both hashes are HMAC-SHA-256 under it (other keys, same format).
 *
 * @throws InvalidInputError on an empty, oversized or non-string part, non-JSON args, or args
 * over `maxArgsBytes`. Nothing is stored.
 */
export function deriveKey(input: KeyInput, options: DeriveKeyOptions = {}): DerivedKey {
  const { key, fingerprint } = deriveKeyAndSize(input, options);
  return { key, fingerprint };
}

/**
 * `deriveKey`, plus the size of the canonical args in UTF-8 bytes (for events; -1 when not
 * measured, see `measure`).
 * @internal Not exported from the package.
 */
export function deriveKeyAndSize(
  input: KeyInput,
  options: DeriveKeyOptions & {
    hash?: (text: string) => string;
    /** Count `argsBytes` exactly even when the args are far below the limit. @default true */
    measure?: boolean;
  } = {},
): DerivedKey & { argsBytes: number } {
  if (input === null || typeof input !== 'object') {
    throw new InvalidInputError({
      field: 'input',
      message: 'deriveKey needs an object { toolName, turnId, scope?, args, businessKey? }.',
    });
  }
  const hasBusinessKey = input.businessKey !== undefined;
  validateKeyParts({
    toolName: input.toolName,
    turnId: input.turnId,
    scope: input.scope,
    requireTurnId: !hasBusinessKey,
  });
  if (input.args === undefined) {
    throw new InvalidInputError({
      field: 'args',
      message:
        'args is undefined. Pass the tool arguments as JSON (use {} for a tool without arguments).',
    });
  }
  const maxArgsBytes = options.maxArgsBytes ?? DEFAULT_MAX_ARGS_BYTES;
  const canonicalArgs = canonicalize(input.args);
  // UTF-8 takes at most 3 bytes per UTF-16 code unit: args that short need no count for the
  // limit, only for whoever asked for the size.
  const argsBytes =
    options.measure === false && canonicalArgs.length * 3 <= maxArgsBytes
      ? -1
      : utf8Length(canonicalArgs);
  if (argsBytes > maxArgsBytes) {
    throw new InvalidInputError({
      field: 'args',
      message: `args are ${argsBytes} bytes of JSON; the limit is ${maxArgsBytes}. Pass a smaller payload (a reference instead of the data) or raise maxArgsBytes.`,
    });
  }
  const hash = options.hash ?? keyHasher(options.argsHmacKey);
  const fingerprint = hash(canonicalArgs);
  const scope = input.scope ?? null;
  let parts: string;
  if (hasBusinessKey) {
    const business = canonicalizeBusinessKey(input.businessKey);
    if (business === '""' || utf8Length(business) > KEY_LIMITS.businessKey) {
      throw new InvalidInputError({
        field: 'businessKey',
        message: `businessKey must be non-empty JSON of at most ${KEY_LIMITS.businessKey} bytes. Use a stable identifier such as an email or an external id.`,
      });
    }
    parts = `["idempotent-tools/key","${KEY_VERSION}",${scope === null ? 'null' : JSON.stringify(scope)},"business",${JSON.stringify(input.toolName)},${business}]`;
  } else {
    // The canonical JSON of ['idempotent-tools/key', KEY_VERSION, scope, 'turn', turnId,
    // toolName, fingerprint], written directly: the parts are well-formed strings (checked above)
    // or null, for which RFC 8785 serialises exactly as JSON.stringify does, and the fingerprint
    // is base64url (nothing to escape). The golden vectors pin it.
    parts = `["idempotent-tools/key","${KEY_VERSION}",${scope === null ? 'null' : JSON.stringify(scope)},"turn",${JSON.stringify(input.turnId)},${JSON.stringify(input.toolName)},"${fingerprint}"]`;
  }
  return { key: `${KEY_VERSION}_${hash(parts)}`, fingerprint, argsBytes };
}
