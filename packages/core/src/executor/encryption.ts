/**
 * Encryption of stored outcomes at rest (AES-256-GCM, `node:crypto`). Executor-level only: stores
 * keep opaque strings. An encrypted outcome is the envelope
 *
 * ```
 * enc:v1:<keyId>:<iv>:<tag>:<ciphertext>        (iv, tag, ciphertext: base64url)
 * ```
 *
 * with a random 96-bit IV per outcome and a 128-bit tag. The additional authenticated data binds
 * the ciphertext to the record's key and state, so an outcome copied under another key (or a
 * `failed` record relabelled `completed`) fails authentication. Old keys stay in `keys` for
 * reading: rotation is adding a key and moving `current` to it.
 */
import type { KeyObject } from 'node:crypto';
import { ConfigurationError, InvalidInputError, RecordIntegrityError } from '../errors/index.js';
import { builtinModule, nodeCrypto } from '../runtime/index.js';

const { Buffer } = builtinModule<typeof import('node:buffer')>('node:buffer') ?? {};

/** Options of `encryption` (see `IdempotencyOptions`). */
export interface EncryptionOptions {
  /**
   * The keys, by id: 32 random bytes each (AES-256), e.g. `{ k2: Buffer.from(env.K2, 'base64') }`.
   * Ids are 1-32 characters of `A-Z a-z 0-9 _ -`; the id is stored with every record. Keep an old
   * key here for as long as records it sealed may live (the longest `ttl`).
   */
  keys: Readonly<Record<string, Uint8Array>>;
  /** The id of the key that seals new outcomes; one of `keys`. */
  current: string;
  /**
   * Replay plaintext outcomes (written before encryption was turned on). Off, a plaintext record
   * is refused with `RecordIntegrityError` (`reason: 'unencrypted'`): someone who can write to
   * the store cannot inject an outcome without a key. Turn it on for one `ttl` while migrating.
   * @default false
   */
  acceptPlaintext?: boolean;
}

/** Seals and opens stored outcomes. @internal */
export interface OutcomeCodec {
  /** The string to store for the outcome JSON `json` of the record `key` in `state`. */
  seal(key: string, state: 'completed' | 'failed', json: string): string;
  /** The outcome JSON of a stored outcome; throws `RecordIntegrityError` when it is refused. */
  open(key: string, state: 'completed' | 'failed', stored: string): string;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const PREFIX = 'enc:';
const ENVELOPE =
  /^enc:v1:([A-Za-z0-9_-]{1,32}):([A-Za-z0-9_-]{16}):([A-Za-z0-9_-]{22}):([A-Za-z0-9_-]*)$/;

function aad(key: string, state: string): Uint8Array {
  return new TextEncoder().encode(`idempotent-tools/outcome/v1\n${state}\n${key}`);
}

function integrity(
  key: string,
  reason: RecordIntegrityError['reason'],
  why: string,
  keyId?: string,
  cause?: unknown,
): RecordIntegrityError {
  return new RecordIntegrityError({
    key,
    reason,
    keyId,
    cause,
    message: `The stored outcome of ${key} failed its integrity check: ${why}. It was not replayed and the tool did not run. Do not retry as it is: check the encryption keys of every process on this store, or inspect the record and delete it (it also goes away after its ttl).`,
  });
}

/** Plaintext outcomes only: refuse an encrypted one (no keys to open it). */
const PLAIN: OutcomeCodec = {
  seal: (_key, _state, json) => json,
  open(key, _state, stored) {
    if (stored.startsWith(PREFIX)) {
      const keyId = ENVELOPE.exec(stored)?.[1];
      throw integrity(
        key,
        'unknown_key',
        `it is encrypted${keyId === undefined ? '' : ` with key '${keyId}'`}, and this executor has no encryption keys`,
        keyId,
      );
    }
    return stored;
  },
};

/**
 * Validate `encryption` and build the codec.
 * @throws InvalidInputError (field `encryption...`) on a bad option.
 */
export function createOutcomeCodec(options: EncryptionOptions | undefined): OutcomeCodec {
  if (options === undefined) return PLAIN;
  const bad = (field: string, message: string) =>
    new InvalidInputError({ field: `encryption${field}`, message });
  if (options === null || typeof options !== 'object') {
    throw bad('', 'encryption must be { keys: { <id>: 32-byte key }, current: <id> }.');
  }
  const crypto = nodeCrypto;
  if (typeof crypto?.createCipheriv !== 'function' || Buffer === undefined) {
    throw new ConfigurationError({
      option: 'encryption',
      message:
        "encryption needs node:crypto's AES-256-GCM, which this runtime does not have: on Cloudflare Workers enable the nodejs_compat compatibility flag; elsewhere run on Node, Deno or Bun, or leave encryption out.",
    });
  }
  const { createCipheriv, createDecipheriv, createSecretKey, randomBytes } = crypto;
  const { keys, current, acceptPlaintext = false } = options;
  if (keys === null || typeof keys !== 'object') {
    throw bad('.keys', 'encryption.keys must be an object of key id -> 32-byte key.');
  }
  const secrets = new Map<string, KeyObject>();
  for (const [id, value] of Object.entries(keys)) {
    if (!KEY_ID.test(id)) {
      throw bad(
        '.keys',
        `encryption key id ${JSON.stringify(id)} is not 1-32 characters of A-Z a-z 0-9 _ -.`,
      );
    }
    if (!(value instanceof Uint8Array) || value.byteLength !== 32) {
      throw bad(
        `.keys.${id}`,
        `encryption key '${id}' must be 32 bytes (AES-256), e.g. crypto.randomBytes(32); got ${value instanceof Uint8Array ? `${value.byteLength} bytes` : typeof value}.`,
      );
    }
    // A copy: later changes to the caller's buffer do not change the key.
    secrets.set(id, createSecretKey(Buffer.from(value)));
  }
  const sealing = typeof current === 'string' ? secrets.get(current) : undefined;
  if (sealing === undefined) {
    throw bad(
      '.current',
      `encryption.current must be the id of one of encryption.keys (${[...secrets.keys()].map((id) => `'${id}'`).join(', ') || 'none given'}), got ${String(current)}.`,
    );
  }
  if (typeof acceptPlaintext !== 'boolean') {
    throw bad('.acceptPlaintext', 'encryption.acceptPlaintext must be true or false.');
  }

  return {
    seal(key, state, json) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', sealing, iv);
      cipher.setAAD(aad(key, state));
      const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return `enc:v1:${current}:${iv.toString('base64url')}:${tag.toString('base64url')}:${ciphertext.toString('base64url')}`;
    },
    open(key, state, stored) {
      if (!stored.startsWith(PREFIX)) {
        if (acceptPlaintext) return stored;
        throw integrity(
          key,
          'unencrypted',
          'it is not encrypted, and this executor encrypts every outcome (set encryption.acceptPlaintext while records written before encryption are live)',
        );
      }
      const match = ENVELOPE.exec(stored);
      if (match === null)
        throw integrity(key, 'corrupt', 'it is not a well-formed encrypted outcome');
      const [, keyId = '', iv = '', tag = '', ciphertext = ''] = match;
      const secret = secrets.get(keyId);
      if (secret === undefined) {
        throw integrity(
          key,
          'unknown_key',
          `it is encrypted with key '${keyId}', which is not in encryption.keys (keep retired keys there for one ttl)`,
          keyId,
        );
      }
      try {
        const decipher = createDecipheriv('aes-256-gcm', secret, Buffer.from(iv, 'base64url'), {
          authTagLength: 16,
        });
        decipher.setAAD(aad(key, state));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        const plain = Buffer.concat([
          decipher.update(Buffer.from(ciphertext, 'base64url')),
          decipher.final(),
        ]);
        return plain.toString('utf8');
      } catch (cause) {
        throw integrity(
          key,
          'tampered',
          `its authentication tag does not match (altered, or copied from another record) under key '${keyId}'`,
          keyId,
          cause,
        );
      }
    },
  };
}
