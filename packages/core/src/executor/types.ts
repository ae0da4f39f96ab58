// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
/**
 * The executor's public types and constants (design section 6, docs/design.md). Types only and
 * plain constants: the executor's parts, the ledger and the vendor helpers import them from
 * here, so no module depends on the executor's implementation.
 */
import type { KeyObject } from 'node:crypto';
import type { DerivedKey } from '../keys/derive-key.js';
import type { EventHandler } from '../observe/events.js';
import type { IdempotencyRecord, IdempotencyStore } from '../store/store.js';
import type { EncryptionOptions } from './encryption.js';

const HOUR = 60 * 60 * 1000;
/** Default `maxResultBytes`: 1 MiB of JSON. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

/** Defaults of the executor's per-tool options. */
export const DEFAULTS = {
  ttl: 24 * HOUR,
  lease: 30_000,
  waitTimeout: 30_000,
  onDrift: 'reject',
  onInProgress: 'wait',
  onStale: 'outcome-unknown',
  onStoreUnavailable: 'fail-closed',
} as const;

/** One tool call: what identifies it. */
export interface Call<Args = unknown> {
  toolName: string;
  /** The conversation turn (not the provider's tool-call id). Required unless a business key is used. */
  turnId?: string | undefined;
  /** Tenant / user. Records of one scope are invisible to another. */
  scope?: string | undefined;
  args: Args;
}

/** What the tool function receives besides its arguments. */
export interface ExecutionContext {
  /** The idempotency key: send it on as the vendor's `Idempotency-Key`. */
  key: string;
  toolName: string;
  turnId: string | undefined;
  scope: string | undefined;
  /**
   * Aborted when this attempt no longer owns the call (another attempt took it over, or no
   * renewal of its lease was secured in time): stop side effects.
   */
  signal: AbortSignal;
  /**
   * Ask right before a side effect: true while this attempt still owns the call (the lease it
   * last secured, on a monotonic clock counted from when it was sent, has a margin left).
   * Synchronous, so it holds even after a long synchronous step, before any timer could abort
   * `signal`. `idempotentFetch`, `idempotencyHeaders` and `vendorCall` ask it for you.
   */
  stillOwned(): boolean;
}

/** What `reconcile` is given: the stale record and the call. */
export interface ReconcileContext<Args> {
  key: string;
  args: Args;
  toolName: string;
  turnId: string | undefined;
  scope: string | undefined;
  /** The stale `in_progress` record: when the unfinished attempt started, its token. */
  record: IdempotencyRecord;
}

/**
 * The answer of `reconcile`: `{ found: true, value }` (the effect happened: adopt `value` as the
 * outcome), `{ found: false }` (it certainly did not happen: run the tool), or `undefined`
 * (cannot tell: the call fails with `OutcomeUnknownError`).
 */
export type Reconciliation<Result> = { found: true; value: Result } | { found: false } | undefined;

/** What `onReplay` is told of the call whose stored outcome it shapes. */
export interface ReplayContext {
  key: string;
  toolName: string;
  turnId: string | undefined;
  scope: string | undefined;
  /** `'replayed'`: the outcome was stored already; `'waited'`: after waiting for a running duplicate. */
  outcome: 'replayed' | 'waited';
  /** When the call that ran was claimed, ms since the epoch (the store's clock). */
  createdAt: number;
  /** When it stored its outcome (the store's clock), when the store says. */
  completedAt: number | undefined;
  /** When the stored outcome expires (the store's clock). */
  expiresAt: number;
}

/** Per-tool policy. Every field is optional; the executor's options give the defaults. */
export interface ToolPolicy<Args = unknown, Result = unknown> {
  /** How long an outcome is kept, in ms. @default 86400000 (24 h) */
  ttl?: number;
  /** How long a running call holds its claim before it counts as stale, in ms; renewed while the tool runs. @default 30000 */
  lease?: number;
  /**
   * The identity of the call when the arguments are not: e.g. `(args) => args.email`. The key is
   * then scope + tool name + this value (the turn is not part of it unless you return it too).
   * @default undefined (full args + turn id)
   */
  businessKey?: (args: Args, call: Call<Args>) => unknown;
  /** Business key matches, args differ: `'reject'` (DriftError) or `'replay'` the stored outcome. @default 'reject' */
  onDrift?: 'reject' | 'replay';
  /** A duplicate is running: `'wait'` for its outcome and replay it, or `'reject'` at once (InProgressError). @default 'wait' */
  onInProgress?: 'wait' | 'reject';
  /** Longest wait for a running duplicate, in ms; then InProgressError. @default 30000 */
  waitTimeout?: number;
  /**
   * An earlier attempt died mid-way (stale record). Look the effect up (e.g. at the vendor, by
   * the key) and say what you found. Runs before `onStale`.
   */
  reconcile?: (context: ReconcileContext<Args>) => Promise<Reconciliation<Result>>;
  /**
   * How long a request that a stale attempt sent may still take to reach its vendor and commit
   * there, in ms. Before `reconcile` is asked (or `onStale: 'reexecute'` runs again), the stale
   * record must have been seen unchanged (no renewal, no outcome) for this long, at least a
   * lease, on this process's monotonic clock: a live holder renews within a third of a lease
   * whatever the store's clock did, and a request the holder sent just before it stopped gets
   * this long to show at the vendor before `reconcile` decides it did not happen. Set it above
   * your vendors' request timeouts. @default the lease
   */
  settleWindow?: number;
  /**
   * A stale record that `reconcile` could not settle: `'outcome-unknown'` fails the call
   * (OutcomeUnknownError); `'reexecute'` runs the tool again, which needs `vendorDedupes: true`
   * (else InvalidInputError). @default 'outcome-unknown'
   */
  onStale?: 'outcome-unknown' | 'reexecute';
  /**
   * Your declaration that every side effect of the tool is deduped by the key it sends: each
   * vendor honours `Idempotency-Key` (sent with `idempotentFetch` / `idempotencyHeaders`), or the
   * call goes through `idempotency.vendorCall` (the ledger). Only then may `onStale: 'reexecute'`
   * run a stale call again. @default false
   */
  vendorDedupes?: boolean;
  /** Errors for which this returns true are stored and replayed (not retried). @default () => false */
  isTerminalError?: (error: unknown) => boolean;
  /**
   * The tool threw an error that is not terminal: `'release'` the claim so a retry runs the tool
   * again (the error came before any effect), or `'keep'` the attempt unfinished and stale at once
   * (the error may have come after the effect, e.g. a timeout after the request was sent), so a
   * retry goes to `reconcile`, else to `OutcomeUnknownError`, never to a blind re-run.
   * `'auto'` decides by what the attempt sent: it keeps the attempt when a mutating request went
   * out through `idempotentFetch` / `idempotencyHeaders` to a vendor not declared to dedupe by
   * the key (`vendorDedupes`), and releases it otherwise: nothing sent, every request deduped by
   * the vendor, effects in the ledger (`vendorCall`), or effects it cannot see. Off Node (Workers,
   * edge runtimes, Deno, Bun), where requests are not seen leaving, `'auto'` keeps every attempt
   * that threw unless `vendorDedupes`: set `'release'` for a tool whose errors come before its
   * effect.
   * @default 'auto' ('keep' for `vendorCall`)
   */
  onToolError?: 'auto' | 'release' | 'keep';
  /**
   * The store fails (it is down) on the call's first look-up, before anything ran:
   * `'fail-closed'` fails the call with `StoreUnavailableError` and the tool does not run;
   * `'fail-open'` runs the tool **unguarded** (no record, no replay: a retry runs it again) and
   * resolves with `outcome: 'unguarded'` and an `unguarded` event. Only for tools whose repeat
   * is harmless, or where availability matters more than at-most-once. Never after the tool ran,
   * never while waiting for a running duplicate, never for a stale attempt; a `vendorCall` inside
   * the tool stays fail-closed unless its own policy says otherwise.
   * @default 'fail-closed'
   */
  onStoreUnavailable?: 'fail-closed' | 'fail-open';
  /**
   * Shapes what a replay returns (a stored value, never a stored failure): e.g. add when the
   * original ran, or refresh a presigned URL that has expired since. It gets the stored value
   * (its own copy) and what is known of the call that ran; what it returns (or resolves to) is
   * the replay's `value`. The stored outcome never changes: every replay starts from it. Not
   * called on the first run, nor for an outcome adopted by `reconcile`. An error it throws fails
   * the call with that error (the event's `errorCode` is `on_replay_error`); the record stays.
   * Per tool only. @default undefined (the stored value as it is)
   */
  onReplay?: (value: Result, context: ReplayContext) => Result | Promise<Result>;
}

/** The fields of a `ToolPolicy`: a policy with any other field is refused (a misspelt option). */
export const TOOL_POLICY_FIELDS: readonly (keyof ToolPolicy)[] = [
  'ttl',
  'lease',
  'businessKey',
  'onDrift',
  'onInProgress',
  'waitTimeout',
  'reconcile',
  'settleWindow',
  'onStale',
  'vendorDedupes',
  'isTerminalError',
  'onToolError',
  'onStoreUnavailable',
  'onReplay',
];

/** The fields of `IdempotencyOptions`: options with any other field are refused. */
export const IDEMPOTENCY_OPTION_FIELDS: readonly (keyof IdempotencyOptions)[] = [
  'store',
  'onEvent',
  'exposeArgs',
  'maxArgsBytes',
  'maxResultBytes',
  'encryption',
  'argsHmacKey',
  'ttl',
  'lease',
  'onDrift',
  'onInProgress',
  'waitTimeout',
  'settleWindow',
  'onStale',
  'vendorDedupes',
  'isTerminalError',
  'onToolError',
  'onStoreUnavailable',
];

export interface IdempotencyOptions
  extends Omit<ToolPolicy, 'businessKey' | 'reconcile' | 'onReplay'> {
  /** Where records live. */
  store: IdempotencyStore;
  /**
   * Receives one event per call (see `IdempotencyEvent`). Exceptions it throws are ignored.
   * Combine several sinks with `combineSinks(...)`.
   */
  onEvent?: EventHandler;
  /**
   * Put the raw args on every event (`event.args`). **Unsafe**: args may hold secrets and
   * personal data, and every sink that keeps them keeps those too. For debugging only; the logger
   * sink also needs `redact: false` to log them.
   * @default false
   */
  exposeArgs?: boolean;
  /** Largest accepted args, in bytes of canonical JSON. @default 1048576 */
  maxArgsBytes?: number;
  /**
   * Largest result kept, in UTF-8 bytes of the stored JSON (`{"v":<result>}`). A bigger result
   * fails the call with `PersistFailedError` (`reason: 'invalid_result'`) before it is returned,
   * and is kept as a failure (the tool ran: a retry replays the failure, it does not run again).
   * @default 1048576
   */
  maxResultBytes?: number;
  /**
   * Encrypt stored outcomes at rest with AES-256-GCM, bound to their key: `{ keys: { k2, k1 },
   * current: 'k2' }` (32-byte keys). Records sealed with an older key stay readable while it is
   * in `keys`. A record that fails to open (tampered, copied, unknown key, garbage) is refused
   * with `RecordIntegrityError`, never replayed. Only outcomes are encrypted: keys, fingerprints,
   * tool names, scopes and turn ids are stored as they are.
   * @default undefined (outcomes stored as plain JSON)
   */
  encryption?: EncryptionOptions;
  /**
   * A secret of at least 32 bytes under which the args fingerprint and the key are HMAC-SHA-256
   * instead of SHA-256, so the stored keys and fingerprints do not let anyone confirm guessed
   * args. **It changes every key**: set it before the first call, use the same one in every
   * process on the store, and rotate it only knowing that calls within the ttl window will no
   * longer be recognised as repeats.
   * @default undefined (plain SHA-256: the golden vectors)
   */
  argsHmacKey?: Uint8Array | KeyObject;
}

/** The outcome of a call. */
export interface IdempotentResult<Result> {
  value: Result;
  /** True when the value is a stored outcome and the tool did not run for this call. */
  replayed: boolean;
  key: string;
  /**
   * `executed`, `replayed`, `waited`, `reconciled`, or `unguarded`: the store was down and the
   * tool ran without protection (`onStoreUnavailable: 'fail-open'`).
   */
  outcome: 'executed' | 'replayed' | 'waited' | 'reconciled' | 'unguarded';
}

export type ToolFunction<Args, Result> = (
  args: Args,
  context: ExecutionContext,
) => Result | Promise<Result>;

export interface Idempotency {
  /** Run one call idempotently: a lookup first, the tool only when no outcome is stored. */
  run<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    policy?: ToolPolicy<Args, Result>,
  ): Promise<IdempotentResult<Result>>;
  /** Wrap a function once; call it with the args and the call's turn / scope. */
  wrap<Args, Result>(
    toolName: string,
    fn: ToolFunction<Args, Result>,
    policy?: ToolPolicy<Args, Result>,
  ): (
    args: Args,
    call: { turnId?: string | undefined; scope?: string | undefined },
  ) => Promise<IdempotentResult<Result>>;
  /** Derive the key a call would use (validates the input; touches no store). */
  keyOf<Args>(
    call: Call<Args>,
    policy?: { businessKey?: ToolPolicy<Args>['businessKey'] | undefined },
  ): DerivedKey;
  /**
   * The ledger (design section 8 (docs/design.md)), for a vendor with no idempotency support, called from inside
   * a tool: a pending record before `fn`, its outcome after; a retry of the tool replays it
   * instead of calling the vendor again; a pending record left by a dead attempt goes to
   * `policy.reconcile` (look the effect up at the vendor by `vendor.key`), else the call fails
   * with `OutcomeUnknownError`. The key is derived from the tool call's key and `label`, so it is
   * the same on every retry and in every process.
   *
   * @param context the tool's `ctx`; undefined: the tool call running now
   * @param label names the vendor call within the tool (e.g. `'bank.transfer'`), 1-128 characters
   */
  vendorCall<Result>(
    context: ExecutionContext | undefined,
    label: string,
    fn: VendorCallFunction<Result>,
    policy?: VendorCallPolicy<Result>,
  ): Promise<IdempotentResult<Result>>;
  /**
   * Settle a stuck record, as an operator (audited: one `settled` event with `operator`): an
   * `in_progress` record whose attempt died, whose effect you looked up yourself, is marked
   * completed with `{ completed: value }` (replayed from then on) or released with
   * `{ released: true }` (the call may run again). Only once its lease has run out: a live
   * attempt is never overruled. The outcome is sealed like any other (encryption included).
   * @throws InvalidInputError when there is nothing to settle, the record is finished or still
   *   held, or the settlement is not JSON
   */
  settle(
    key: string,
    settlement: Settlement,
    operator: { by: string; reason: string },
  ): Promise<SettlementResult>;
  /**
   * Validate a tool policy now instead of at its first call (adapters call it when they wrap a
   * tool, so a bad policy fails there).
   * @throws InvalidInputError naming the field at fault (an unknown field too)
   */
  checkPolicy(policy: ToolPolicy<never, never>): void;
  readonly store: IdempotencyStore;
}

/** The args of a ledger call: none (the tool call's key and the label identify it). */
export type VendorCallArgs = Record<string, never>;

/**
 * Policy of one ledger call: the executor's per-tool policy (`reconcile`, `onStale`, `lease`,
 * `ttl`, `waitTimeout`, `onInProgress`, `isTerminalError`, `onToolError`) without `businessKey`
 * and `onDrift`, which the ledger sets. `onStale` defaults to `'outcome-unknown'` and
 * `onToolError` to `'keep'` here whatever the executor's defaults are: a vendor without
 * idempotency must not be called twice blindly, and a request that threw may have reached it.
 */
export type VendorCallPolicy<Result> = Omit<
  ToolPolicy<VendorCallArgs, Result>,
  'businessKey' | 'onDrift'
>;

/**
 * The vendor call. `vendor.key` is this call's own key: give it to the vendor as your reference
 * (a payment reference, a metadata field) so that `reconcile` can look the effect up by it.
 * `vendor.signal` is aborted when this call or its tool call loses its claim.
 */
export type VendorCallFunction<Result> = (vendor: ExecutionContext) => Result | Promise<Result>;

/** An operator's decision on a stuck record: the outcome found, or release. */
export type Settlement = { completed: unknown } | { released: true };

export interface SettlementResult {
  key: string;
  action: 'completed' | 'released';
  /** The stuck record as it was before (its attempt's token, when it started). */
  previous: IdempotencyRecord;
}
