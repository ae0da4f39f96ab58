/**
 * The store contract (design section 5 (docs/design.md)). Every store (memory, SQLite, Redis, PostgreSQL, yours)
 * implements this interface and passes the conformance suite of `@idempotent-tools/testing`.
 *
 * Times are milliseconds. `expiresAt`, `leaseExpiresAt`, `createdAt` and `completedAt` are
 * milliseconds since the Unix epoch on the store's clock.
 */

/** The states of a stored record (design section 4 (docs/design.md)). A released record is deleted. */
export type RecordState = 'in_progress' | 'completed' | 'failed';

/** What a store keeps under one key. */
export interface IdempotencyRecord {
  /** The idempotency key. */
  key: string;
  state: RecordState;
  /** SHA-256 (base64url) of the canonical args: drift detection for business keys. */
  fingerprint: string;
  /** Owner (fencing) token of the attempt that claimed the record last. */
  token: string;
  /** When the owner's lease runs out. Meaningful while `in_progress`; past it the record is stale. */
  leaseExpiresAt: number;
  /** When the record disappears (the retention TTL). */
  expiresAt: number;
  /** When the record was first claimed. Kept across takeovers. */
  createdAt: number;
  /** When the outcome was stored (`completed` / `failed`). */
  completedAt?: number;
  /**
   * The stored outcome, serialised by the executor (opaque to the store). Present when
   * `completed` or `failed`.
   */
  outcome?: string;
  /** Descriptive fields for inspection (tool name, scope, turn id). Never part of the identity. */
  meta?: RecordMeta;
}

/** Descriptive fields stored with a record, for inspection and audit. */
export interface RecordMeta {
  toolName?: string;
  scope?: string;
  turnId?: string;
}

export interface ClaimInput {
  key: string;
  /** Fingerprint of this call's args; compared with the stored one for drift. */
  fingerprint: string;
  /**
   * The new owner token, used if the claim is acquired. Unique per attempt: a claim sent again
   * with the same token (its reply was lost) is the same attempt, and finds its own record.
   */
  token: string;
  /** How long the claim is held before it counts as stale. */
  leaseMs: number;
  /** How long the record is kept (from now, and again from completion). */
  ttlMs: number;
  meta?: RecordMeta;
}

/**
 * The one answer of `claim`. Exactly one of:
 * - `acquired`: no live record existed; this caller owns a new `in_progress` record. Also the
 *   answer to a claim sent again by its own attempt: the live `in_progress` record holds the
 *   caller's own token (and fingerprint), so the caller owns it; the record as stored, nothing
 *   changed, except that a lease that ran out meanwhile is renewed for `leaseMs` (as `renew`
 *   would: nobody took over). Own token on a finished record: `completed`.
 * - `completed`: a finished record (state `completed` or `failed`) with the same fingerprint: replay it.
 * - `in_progress`: a live attempt with the same fingerprint holds the record.
 * - `stale`: an `in_progress` record with the same fingerprint whose lease ran out.
 * - `drift`: a live record (any state) whose fingerprint differs from this call's.
 */
export type ClaimResult =
  | { status: 'acquired'; token: string; record: IdempotencyRecord }
  | { status: 'completed'; record: IdempotencyRecord }
  | { status: 'in_progress'; record: IdempotencyRecord }
  | { status: 'stale'; record: IdempotencyRecord }
  | { status: 'drift'; record: IdempotencyRecord };

export interface CompleteInput {
  key: string;
  /** The owner token from the claim (or takeover). The write is fenced by it. */
  token: string;
  state: 'completed' | 'failed';
  outcome: string;
  /** Retention, counted from now. */
  ttlMs: number;
}

export interface TakeoverInput {
  key: string;
  /** The token of the stale record being taken over (fence: it must still be the owner). */
  staleToken: string;
  /** The new owner token. */
  token: string;
  leaseMs: number;
  ttlMs: number;
}

/** Optional features a store may have; the executor and the conformance suite read them. */
export interface StoreCapabilities {
  /**
   * `waitForChange` resolves promptly on every change made through any client of the backing
   * engine (other processes included), not only on timeout: waiters need not poll.
   */
  notifiesChanges: boolean;
  /** Records survive a restart of the process (and of the engine, where the engine persists). */
  durable: boolean;
  /**
   * The largest outcome the store can hold, in UTF-8 bytes of the outcome string `complete` is
   * given (an engine's item or value limit). A result whose outcome is larger fails at once, is
   * kept as a failure, and is never sent to the store. @default no limit beyond the executor's
   * `maxResultBytes`
   */
  maxOutcomeBytes?: number;
}

/**
 * The store contract. Every write after `claim` is fenced: it succeeds only if `token` still owns
 * the record, and returns `false` otherwise. Expired records (past `expiresAt`) are invisible.
 *
 * Every operation is safe to send again: a reply lost on the way back (a dropped connection
 * after the commit, a client that re-sends its in-flight commands after a reconnect, a command
 * timeout) leaves the caller to retry the same input, and the retry answers what the first
 * attempt did: `claim` -> `acquired` (own token), `complete` -> `true` (same token, state and
 * outcome), `takeover` -> `true` (record `in_progress` under the new token), `renew` -> `true`.
 * A `release` sent again answers `false` (the record is gone): it cannot be told from a release
 * that lost to another write, and needs not be (either way the attempt owns nothing).
 *
 * Errors reaching the engine must be thrown as `StoreUnavailableError`. A record the store
 * cannot read (a value or row it did not write: garbage, a finished record without its outcome)
 * is a `RecordIntegrityError` with reason `corrupt`, never `StoreUnavailableError`: the engine
 * answered, and `onStoreUnavailable: 'fail-open'` must not run the tool over it.
 */
export interface IdempotencyStore {
  /** Version of this contract the store implements. */
  readonly specificationVersion: 'v1';
  /** Short name for logs and events, e.g. `memory`, `redis`. */
  readonly name: string;
  readonly capabilities: StoreCapabilities;

  /**
   * One atomic step (one round trip): create an `in_progress` record, or report what is there.
   * Sent again with the same token, it answers `acquired` (see `ClaimResult`).
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /**
   * Store the outcome (fenced). `false`: the token no longer owns the record. Sent again (the
   * record is already finished by this token with this state and outcome): `true`, nothing
   * changes (the retention is not extended). With another state or outcome: `false`, the first
   * outcome is kept.
   */
  complete(input: CompleteInput): Promise<boolean>;
  /**
   * Delete the record so the call may run again (fenced). Sent again, it finds no record and
   * answers `false`, like a release that lost.
   */
  release(key: string, token: string): Promise<boolean>;
  /** Extend the lease of a running attempt (fenced; only while `in_progress`). Idempotent. */
  renew(key: string, token: string, leaseMs: number): Promise<boolean>;
  /**
   * Atomically take over a stale record: only if it is still `in_progress`, still owned by
   * `staleToken`, and its lease has run out. The record stays `in_progress` under the new token.
   * Sent again by the new owner (the record is `in_progress` under `token`): `true`, nothing
   * changes.
   */
  takeover(input: TakeoverInput): Promise<boolean>;
  /**
   * Read a live record (inspection; not used on the hot path). One the store cannot read throws
   * `RecordIntegrityError`.
   */
  get(key: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Resolve when the record at `key` may have changed (completed, released, deleted), or after
   * `timeoutMs`, whichever comes first. Optional: a store that cannot wake waiters promptly on a
   * change leaves it out (the conformance suite checks prompt wake-ups), and the executor then
   * polls adaptively; it re-claims after every wake-up either way. When `signal` aborts (the
   * waiter was woken another way), resolve at once and keep nothing of the wait: no timer, no
   * subscription of its own.
   */
  waitForChange?(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void>;
  /** Delete expired records now. Returns how many were removed. */
  purgeExpired?(): Promise<number>;
  /**
   * Inspection (optional, admin only, never on the hot path): one page of live records matching
   * `filter`, without their outcomes. Page on with the returned `cursor` until it is undefined.
   * A record live for the whole listing is returned at least once. Cost: up to a scan of every
   * record (see each store's README). Invalid filters throw `InvalidInputError`.
   */
  list?(filter?: ListFilter): Promise<RecordPage>;
  /** Inspection (optional, admin only): live records counted by state, stale ones apart. */
  stats?(filter?: StatsFilter): Promise<StoreStats>;
  /** Release resources the store itself created (never the user's client). */
  close?(): Promise<void>;
}

/**
 * The state of a record as inspection reports it: `in_progress` split by the lease, on the
 * store's clock. `in_progress` means a live lease, `stale` an `in_progress` record whose lease ran
 * out (the attempt probably died; its effect is unknown).
 */
export type InspectionState = 'in_progress' | 'stale' | 'completed' | 'failed';

/** Which records `stats` counts. Every field narrows; none means every live record. */
export interface StatsFilter {
  toolName?: string;
  turnId?: string;
  scope?: string;
}

/** Which records `list` returns. */
export interface ListFilter extends StatsFilter {
  state?: InspectionState;
  /** Most records in one page, 1 to 1000. @default 100 */
  limit?: number;
  /** The `cursor` of the previous page. */
  cursor?: string;
}

/** A record as `list` returns it: everything but the outcome, which may be large or sensitive. */
export interface ListedRecord extends Omit<IdempotencyRecord, 'outcome'> {
  /** The state with `stale` told apart, on the store's clock. */
  inspectionState: InspectionState;
  /** Size of the stored outcome in UTF-8 bytes, when there is one. */
  outcomeBytes?: number;
}

export interface RecordPage {
  records: ListedRecord[];
  /** Pass it to the next `list` call; undefined on the last page. */
  cursor?: string;
}

/** Live records by state (`inProgress` + `stale` + `completed` + `failed` = `records`). */
export interface StoreStats {
  records: number;
  /** `in_progress` with a live lease. */
  inProgress: number;
  /** `in_progress` whose lease ran out. */
  stale: number;
  completed: number;
  failed: number;
  /** The store's clock when it counted, ms since the epoch. */
  at: number;
}
