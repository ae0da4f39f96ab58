import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { IdempotencyRecord, RecordMeta, RecordState } from '@idempotent-tools/core';

/**
 * The attributes of one record item (see `table/table.json`). Every expression names them
 * through `ExpressionAttributeNames` (`#state`, `#token`, ...): several are reserved words.
 *
 * | attribute        | type | holds                                                          |
 * | ---------------- | ---- | -------------------------------------------------------------- |
 * | `id`             | S    | the partition key: the store's `prefix` + the idempotency key  |
 * | `state`          | S    | `in_progress`, `completed` or `failed`                         |
 * | `fingerprint`    | S    | fingerprint of the args                                        |
 * | `token`          | S    | owner (fencing) token                                          |
 * | `leaseExpiresAt` | N    | ms since the epoch                                             |
 * | `expiresAt`      | N    | ms since the epoch: the store's own expiry, checked everywhere |
 * | `createdAt`      | N    | ms                                                             |
 * | `completedAt`    | N    | ms, once finished                                              |
 * | `outcome`        | S    | the stored outcome, once finished                              |
 * | `outcomeBytes`   | N    | its UTF-8 size, for `list` (which never reads the outcome)     |
 * | `keepMs`         | N    | while in progress: how long the record outlives its lease      |
 * | `keepSeconds`    | N    | the same, in whole seconds rounded up (for `ttl`)              |
 * | `ttl`            | N    | seconds since the epoch, >= `expiresAt`: DynamoDB's TTL        |
 * | `toolName`, `scope`, `turnId` | S | the record's meta, when given                    |
 *
 * An `in_progress` record always has `expiresAt = leaseExpiresAt + keepMs` and
 * `ttl >= expiresAt / 1000`, so `renew` moves both with one update expression
 * (`expiresAt = :lease + keepMs`, `ttl = :leaseSeconds + keepSeconds`), no read first.
 */
export const A = {
  id: 'id',
  state: 'state',
  fingerprint: 'fingerprint',
  token: 'token',
  lease: 'leaseExpiresAt',
  expires: 'expiresAt',
  created: 'createdAt',
  completed: 'completedAt',
  outcome: 'outcome',
  outcomeBytes: 'outcomeBytes',
  keepMs: 'keepMs',
  keepSeconds: 'keepSeconds',
  ttl: 'ttl',
  toolName: 'toolName',
  scope: 'scope',
  turnId: 'turnId',
} as const;

/** `#name` -> attribute name, for every attribute (unused ones are refused by DynamoDB). */
export function names(...keys: Array<keyof typeof A>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) out[`#${k}`] = A[k];
  return out;
}

export type Item = Record<string, AttributeValue>;

export const S = (value: string): AttributeValue => ({ S: value });
export const N = (value: number): AttributeValue => ({ N: String(value) });

/** The `ttl` attribute for an expiry in ms: whole seconds, never before the expiry. */
export const ttlSeconds = (expiresAt: number): number => Math.ceil(expiresAt / 1000);

const STATES: readonly RecordState[] = ['in_progress', 'completed', 'failed'];

/** Why an item is not a record of this store. */
export class NotARecord extends Error {}

function text(item: Item, name: string): string {
  const value = item[name];
  if (value === undefined || typeof value.S !== 'string') {
    throw new NotARecord(`attribute ${name} is missing or not a string`);
  }
  return value.S;
}

function time(item: Item, name: string): number {
  const value = item[name];
  const n = value !== undefined && typeof value.N === 'string' ? Number(value.N) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new NotARecord(`attribute ${name} is missing or not a time in ms`);
  }
  return n;
}

/**
 * The record in an item. `withOutcome: false` (inspection: the outcome was not read) skips it.
 * Throws `NotARecord` when the item is not one this store wrote.
 */
export function toRecord(key: string, item: Item, withOutcome = true): IdempotencyRecord {
  const state = text(item, A.state) as RecordState;
  if (!STATES.includes(state)) throw new NotARecord(`state ${JSON.stringify(state)} is unknown`);
  const record: IdempotencyRecord = {
    key,
    state,
    fingerprint: text(item, A.fingerprint),
    token: text(item, A.token),
    leaseExpiresAt: time(item, A.lease),
    expiresAt: time(item, A.expires),
    createdAt: time(item, A.created),
  };
  if (state !== 'in_progress') {
    record.completedAt = time(item, A.completed);
    if (withOutcome) record.outcome = text(item, A.outcome);
  }
  const meta: RecordMeta = {};
  for (const field of ['toolName', 'scope', 'turnId'] as const) {
    if (item[A[field]] !== undefined) meta[field] = text(item, A[field]);
  }
  if (Object.keys(meta).length > 0) record.meta = meta;
  return record;
}

/** The meta attributes of a claim. */
export function metaAttributes(meta: RecordMeta | undefined): Item {
  const out: Item = {};
  if (meta?.toolName !== undefined) out[A.toolName] = S(meta.toolName);
  if (meta?.scope !== undefined) out[A.scope] = S(meta.scope);
  if (meta?.turnId !== undefined) out[A.turnId] = S(meta.turnId);
  return out;
}

/** A copy of the meta a claim stores (what reading it back gives). */
export function copyMeta(meta: RecordMeta): RecordMeta | undefined {
  const copy: RecordMeta = {};
  if (meta.toolName !== undefined) copy.toolName = meta.toolName;
  if (meta.scope !== undefined) copy.scope = meta.scope;
  if (meta.turnId !== undefined) copy.turnId = meta.turnId;
  return Object.keys(copy).length > 0 ? copy : undefined;
}
