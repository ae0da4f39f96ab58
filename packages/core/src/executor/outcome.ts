/**
 * Outcomes as the store keeps them: `{"v": value}` or `{"e": {name, message, code}}` JSON, sealed
 * by the outcome codec (encrypted and bound to the key, or plain), opened and checked on replay.
 */

import { RecordIntegrityError } from '../errors/index.js';
import type { IdempotencyRecord } from '../store/store.js';
import type { OutcomeCodec } from './encryption.js';

/** What a stored outcome's JSON holds: a value or a terminal error. */
export interface StoredOutcome {
  v?: unknown;
  e?: { name: string; message: string; code?: string };
}

export function describeError(error: unknown): { name: string; message: string; code?: string } {
  if (error instanceof Error || (error !== null && typeof error === 'object')) {
    const e = error as { name?: unknown; message?: unknown; code?: unknown };
    const out: { name: string; message: string; code?: string } = {
      name: typeof e.name === 'string' ? e.name : 'Error',
      message: typeof e.message === 'string' ? e.message : String(error),
    };
    if (typeof e.code === 'string') out.code = e.code;
    return out;
  }
  return { name: 'Error', message: String(error) };
}

/** An opened outcome, with what it was opened from (a record object could be changed later). */
export interface OpenedOutcome {
  key: string;
  state: 'completed' | 'failed';
  sealed: string;
  json: string;
}

/**
 * The JSON of a stored outcome: opened (decrypted and authenticated) and parsed. `opened`, given
 * for a record that waiters woken together share, keeps the opened JSON per record object, so it
 * is opened once; it is parsed per caller, so each caller gets its own value.
 */
export function decode(
  codec: OutcomeCodec,
  opened: WeakMap<IdempotencyRecord, OpenedOutcome> | undefined,
  key: string,
  record: IdempotencyRecord,
): { stored: StoredOutcome; json: string } {
  const state = record.state === 'failed' ? 'failed' : 'completed';
  if (record.outcome === undefined) {
    throw new RecordIntegrityError({
      key,
      reason: 'corrupt',
      message: `The record of ${key} is ${record.state} but holds no outcome: the store returned a corrupt record. It was not replayed and the tool did not run. Inspect the record and delete it, then retry.`,
    });
  }
  const sealed = record.outcome;
  let json: string;
  const hit = opened?.get(record);
  if (hit !== undefined && hit.key === key && hit.state === state && hit.sealed === sealed) {
    json = hit.json;
  } else {
    json = codec.open(key, state, sealed);
    opened?.set(record, { key, state, sealed, json });
  }
  let stored: unknown;
  let cause: unknown;
  try {
    stored = JSON.parse(json);
  } catch (error) {
    cause = error;
  }
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) {
    throw new RecordIntegrityError({
      key,
      reason: 'corrupt',
      cause,
      message: `The stored outcome of ${key} is not an outcome this library wrote (not a JSON object): the store returned a corrupt record. It was not replayed and the tool did not run. Inspect the record and delete it, then retry.`,
    });
  }
  return { stored: stored as StoredOutcome, json };
}

/**
 * The value as every replay will get it (design section 6.6): the JSON round trip of what was
 * stored. A `Map` is `{}` there, `NaN` is `null`, a `Date` its ISO string, an `undefined` field
 * is gone, a class instance a plain object: the first caller gets exactly that too. Strings,
 * booleans, `null` and finite numbers are returned as they are (their round trip is themselves).
 *
 * @param encoded the stored JSON, `{"v":...}`
 */
export function asStored<T>(value: T, encoded: string): T {
  if (
    value === null ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value) && !Object.is(value, -0))
  ) {
    return value;
  }
  return (JSON.parse(encoded) as StoredOutcome).v as T;
}
