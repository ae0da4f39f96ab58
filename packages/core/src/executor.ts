import type { KeyObject } from 'node:crypto';
import { randomUUID } from 'node:crypto';
import {
  DEFAULT_MAX_ARGS_BYTES,
  type DerivedKey,
  deriveKeyAndSize,
  keyHasher,
} from './derive-key.js';
import { createOutcomeCodec, type EncryptionOptions, type OutcomeCodec } from './encryption.js';
import {
  DriftError,
  IdempotencyError,
  InProgressError,
  InvalidInputError,
  OutcomeUnknownError,
  PersistFailedError,
  RecordIntegrityError,
  ReplayedFailureError,
  StoreUnavailableError,
} from './errors/index.js';
import type { CallOutcome, EventHandler, IdempotencyEvent } from './events.js';
import { createVendorCall, type VendorCallFunction, type VendorCallPolicy } from './ledger.js';
import { NotAnOutcome } from './not-an-outcome.js';
import { unknownOption } from './option-names.js';
import type { ClaimInput, ClaimResult, IdempotencyRecord, IdempotencyStore } from './store.js';
import { withExecutionContext } from './vendor.js';

const HOUR = 60 * 60 * 1000;
/** Largest duration accepted for ttl / lease / waitTimeout: 366 days. */
const MAX_DURATION = 366 * 24 * HOUR;
/** Default `maxResultBytes`: 1 MiB of JSON. */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;
/** Largest accepted `maxArgsBytes` / `maxResultBytes`: 512 MiB (a JavaScript string's limit). */
const MAX_BYTES = 512 * 1024 * 1024;

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
  /** Aborted when this attempt lost its claim (its lease was taken over): stop side effects. */
  signal: AbortSignal;
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
   * @default 'release' ('keep' for `vendorCall`)
   */
  onToolError?: 'release' | 'keep';
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
  'onStale',
  'vendorDedupes',
  'isTerminalError',
  'onToolError',
  'onStoreUnavailable',
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
  'onStale',
  'vendorDedupes',
  'isTerminalError',
  'onToolError',
  'onStoreUnavailable',
];

export interface IdempotencyOptions extends Omit<ToolPolicy, 'businessKey' | 'reconcile'> {
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
   * Validate a tool policy now instead of at its first call (adapters call it when they wrap a
   * tool, so a bad policy fails there).
   * @throws InvalidInputError naming the field at fault (an unknown field too)
   */
  checkPolicy(policy: ToolPolicy<never, never>): void;
  readonly store: IdempotencyStore;
}

interface StoredOutcome {
  v?: unknown;
  e?: { name: string; message: string; code?: string };
}

function checkDuration(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_DURATION) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number of milliseconds between 1 and ${MAX_DURATION} (366 days), got ${String(value)}.`,
    });
  }
  return value;
}

function checkChoice<T extends string>(field: string, value: unknown, choices: readonly T[]): T {
  if (!choices.includes(value as T)) {
    throw new InvalidInputError({
      field,
      message: `${field} must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${String(value)}.`,
    });
  }
  return value as T;
}

/** `'reexecute'` only with the declaration that the vendors dedupe by the key (design sections 6.4 and 8, docs/design.md). */
function checkStale(
  onStale: 'outcome-unknown' | 'reexecute',
  vendorDedupes: unknown,
): 'outcome-unknown' | 'reexecute' {
  if (typeof vendorDedupes !== 'boolean') {
    throw new InvalidInputError({
      field: 'vendorDedupes',
      message: `vendorDedupes must be true or false, got ${String(vendorDedupes)}.`,
    });
  }
  if (onStale === 'reexecute' && !vendorDedupes) {
    throw new InvalidInputError({
      field: 'onStale',
      message:
        "onStale: 'reexecute' runs a call again whose earlier attempt may already have charged, sent or created something. That is safe only when every vendor call of the tool is deduped by the key it sends (the vendor honours Idempotency-Key, sent with idempotentFetch / idempotencyHeaders, or the call goes through idempotency.vendorCall). Declare it with vendorDedupes: true, or use reconcile to look the effect up instead.",
    });
  }
  return onStale;
}

interface ResolvedPolicy<Args, Result> {
  ttl: number;
  lease: number;
  waitTimeout: number;
  onDrift: 'reject' | 'replay';
  onInProgress: 'wait' | 'reject';
  onStale: 'outcome-unknown' | 'reexecute';
  businessKey: ((args: Args, call: Call<Args>) => unknown) | undefined;
  reconcile: ((context: ReconcileContext<Args>) => Promise<Reconciliation<Result>>) | undefined;
  isTerminalError: ((error: unknown) => boolean) | undefined;
  onToolError: 'release' | 'keep';
  onStoreUnavailable: 'fail-closed' | 'fail-open';
}

/** Longest first wait for a running duplicate on a store that pushes changes, in ms. */
const FIRST_WAIT_MS = 50;

/** The policy of a call that gives none. */
const NO_POLICY: object = Object.freeze({});

function resolvePolicy<Args, Result>(
  defaults: Omit<ToolPolicy, 'businessKey' | 'reconcile'>,
  policy: ToolPolicy<Args, Result>,
): ResolvedPolicy<Args, Result> {
  const unknown = unknownOption(policy, TOOL_POLICY_FIELDS);
  if (unknown !== undefined) {
    throw new InvalidInputError({
      field: unknown.name,
      message: `A tool policy has an ${unknown.message} The fields are ${TOOL_POLICY_FIELDS.join(', ')}.`,
    });
  }
  const fn = <F>(field: string, value: F | undefined): F | undefined => {
    if (value !== undefined && typeof value !== 'function') {
      throw new InvalidInputError({ field, message: `${field} must be a function.` });
    }
    return value;
  };
  return {
    ttl: checkDuration('ttl', policy.ttl ?? defaults.ttl ?? DEFAULTS.ttl),
    lease: checkDuration('lease', policy.lease ?? defaults.lease ?? DEFAULTS.lease),
    waitTimeout: checkDuration(
      'waitTimeout',
      policy.waitTimeout ?? defaults.waitTimeout ?? DEFAULTS.waitTimeout,
    ),
    onDrift: checkChoice('onDrift', policy.onDrift ?? defaults.onDrift ?? DEFAULTS.onDrift, [
      'reject',
      'replay',
    ]),
    onInProgress: checkChoice(
      'onInProgress',
      policy.onInProgress ?? defaults.onInProgress ?? DEFAULTS.onInProgress,
      ['wait', 'reject'],
    ),
    onStale: checkStale(
      checkChoice('onStale', policy.onStale ?? defaults.onStale ?? DEFAULTS.onStale, [
        'outcome-unknown',
        'reexecute',
      ]),
      policy.vendorDedupes ?? defaults.vendorDedupes ?? false,
    ),
    businessKey: fn('businessKey', policy.businessKey),
    reconcile: fn('reconcile', policy.reconcile),
    isTerminalError: fn('isTerminalError', policy.isTerminalError ?? defaults.isTerminalError),
    onToolError: checkChoice(
      'onToolError',
      policy.onToolError ?? defaults.onToolError ?? 'release',
      ['release', 'keep'],
    ),
    onStoreUnavailable: checkChoice(
      'onStoreUnavailable',
      policy.onStoreUnavailable ?? defaults.onStoreUnavailable ?? DEFAULTS.onStoreUnavailable,
      ['fail-closed', 'fail-open'],
    ),
  };
}

function describeError(error: unknown): { name: string; message: string; code?: string } {
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
interface OpenedOutcome {
  key: string;
  state: 'completed' | 'failed';
  sealed: string;
  json: string;
}

/**
 * The JSON of a stored outcome: opened (decrypted and authenticated) and parsed. `opened` keeps
 * the opened JSON per record object: waiters woken together share one record, which is opened
 * once; it is parsed per caller, so each caller gets its own value.
 */
function decode(
  codec: OutcomeCodec,
  opened: WeakMap<IdempotencyRecord, OpenedOutcome>,
  key: string,
  record: IdempotencyRecord,
): { stored: StoredOutcome; json: string } {
  const state = record.state === 'failed' ? 'failed' : 'completed';
  const sealed = record.outcome ?? '{}';
  let json: string;
  const hit = opened.get(record);
  if (hit !== undefined && hit.key === key && hit.state === state && hit.sealed === sealed) {
    json = hit.json;
  } else {
    json = codec.open(key, state, sealed);
    opened.set(record, { key, state, sealed, json });
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

function checkBytes(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_BYTES) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number of bytes between 1 and ${MAX_BYTES}, got ${String(value)}.`,
    });
  }
  return value;
}

/**
 * The executor (design section 6 (docs/design.md)): one state machine for every tool and vendor call.
 *
 * ```ts
 * const idempotency = createIdempotency({ store: createMemoryStore() });
 * const { value, replayed } = await idempotency.run(
 *   { toolName: 'charge', turnId, args },
 *   (args, ctx) => payments.charge(args, { idempotencyKey: ctx.key }),
 * );
 * ```
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  if (options === null || typeof options !== 'object' || options.store == null) {
    throw new InvalidInputError({
      field: 'store',
      message:
        'createIdempotency needs { store }: e.g. createIdempotency({ store: createMemoryStore() }).',
    });
  }
  const {
    store,
    onEvent,
    exposeArgs = false,
    maxArgsBytes = DEFAULT_MAX_ARGS_BYTES,
    maxResultBytes = DEFAULT_MAX_RESULT_BYTES,
    encryption,
    argsHmacKey,
    ...defaults
  } = options;
  const unknown = unknownOption(options, IDEMPOTENCY_OPTION_FIELDS);
  if (unknown !== undefined) {
    throw new InvalidInputError({
      field: unknown.name,
      message: `createIdempotency: ${unknown.message}`,
    });
  }
  if (store.specificationVersion !== 'v1') {
    throw new InvalidInputError({
      field: 'store',
      message: `The store implements contract ${String(store.specificationVersion)}; this version of @idempotent-tools/core needs 'v1'. Upgrade the store package.`,
    });
  }
  checkBytes('maxArgsBytes', maxArgsBytes);
  checkBytes('maxResultBytes', maxResultBytes);
  const codec = createOutcomeCodec(encryption);
  const hash = keyHasher(argsHmacKey);
  /** Outcomes opened by this executor, per record object (see `decode`). */
  const openedOutcomes = new WeakMap<IdempotencyRecord, OpenedOutcome>();

  /**
   * Re-claims after a wait, shared per key: the waiters of this executor woken together send one
   * claim. A waiter reuses the shared answer only when it is a finished record (completed or
   * failed): its own fingerprint decides replay or drift. Any other answer (acquired by the one
   * that sent it, in progress, stale), or a failed claim, and it sends its own.
   */
  const reclaims = new Map<string, Promise<ClaimResult>>();
  const reclaim = (input: ClaimInput): Promise<ClaimResult> => {
    const pending = reclaims.get(input.key);
    if (pending !== undefined) {
      return pending.then(
        (shared): Promise<ClaimResult> | ClaimResult =>
          shared.status === 'completed' ||
          (shared.status === 'drift' && shared.record.state !== 'in_progress')
            ? shared.record.fingerprint === input.fingerprint
              ? { status: 'completed', record: shared.record }
              : { status: 'drift', record: shared.record }
            : store.claim(input),
        () => store.claim(input),
      );
    }
    const sent = store.claim(input);
    reclaims.set(input.key, sent);
    const forget = () => {
      if (reclaims.get(input.key) === sent) reclaims.delete(input.key);
    };
    sent.then(forget, forget);
    return sent;
  };

  /** In-process wake-ups: waiters of this executor are woken when a call of it settles a key. */
  const localWaiters = new Map<string, Set<() => void>>();
  const wake = (key: string) => {
    const set = localWaiters.get(key);
    if (set === undefined) return;
    localWaiters.delete(key);
    for (const resolve of set) resolve();
  };
  const waitLocal = (key: string, timeoutMs: number): Promise<void> =>
    new Promise((resolve) => {
      let set = localWaiters.get(key);
      if (set === undefined) {
        set = new Set();
        localWaiters.set(key, set);
      }
      const waiters = set;
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        done();
        if (waiters.size === 0 && localWaiters.get(key) === waiters) localWaiters.delete(key);
      }, timeoutMs);
      waiters.add(done);
    });

  /**
   * Policies are validated once per policy object (adapters pass the same object for every call
   * of a tool); a policy object changed after its first use keeps its first reading.
   */
  // Also validates the defaults, so a bad option fails at creation.
  const defaultPolicy = resolvePolicy<unknown, unknown>(defaults, {});
  const resolvedPolicies = new WeakMap<object, ResolvedPolicy<unknown, unknown>>();
  function policyFor<Args, Result>(
    toolPolicy: ToolPolicy<Args, Result>,
  ): ResolvedPolicy<Args, Result> {
    if ((toolPolicy as object) === NO_POLICY) return defaultPolicy as ResolvedPolicy<Args, Result>;
    if (toolPolicy === null || typeof toolPolicy !== 'object') {
      throw new InvalidInputError({
        field: 'policy',
        message: 'A tool policy is an object, e.g. { ttl: 3600000 }.',
      });
    }
    let resolved = resolvedPolicies.get(toolPolicy) as ResolvedPolicy<Args, Result> | undefined;
    if (resolved === undefined) {
      resolved = resolvePolicy(defaults, toolPolicy);
      resolvedPolicies.set(toolPolicy, resolved as ResolvedPolicy<unknown, unknown>);
    }
    return resolved;
  }

  function emit(event: IdempotencyEvent): void {
    if (onEvent === undefined) return;
    try {
      onEvent(event);
    } catch {
      // An observer must never break a call.
    }
  }

  function keyOf<Args>(
    call: Call<Args>,
    policy: { businessKey?: ToolPolicy<Args>['businessKey'] | undefined } = {},
  ): DerivedKey {
    if (policy === null || typeof policy !== 'object') {
      throw new InvalidInputError({
        field: 'policy',
        message: 'keyOf takes (call, policy?) where policy is an object such as { businessKey }.',
      });
    }
    if (policy.businessKey !== undefined && typeof policy.businessKey !== 'function') {
      throw new InvalidInputError({
        field: 'businessKey',
        message: 'businessKey must be a function of the args, e.g. (args) => args.email.',
      });
    }
    const { key, fingerprint } = derive(call, policy);
    return { key, fingerprint };
  }

  function derive<Args>(
    call: Call<Args>,
    policy: { businessKey?: ToolPolicy<Args>['businessKey'] | undefined },
  ): DerivedKey & { argsBytes: number } {
    if (call === null || typeof call !== 'object') {
      throw new InvalidInputError({
        field: 'call',
        message: 'A call is an object { toolName, turnId, scope?, args }.',
      });
    }
    const businessKey =
      policy.businessKey === undefined ? undefined : policy.businessKey(call.args, call);
    if (policy.businessKey !== undefined && businessKey === undefined) {
      throw new InvalidInputError({
        field: 'businessKey',
        message: `businessKey returned undefined for tool ${String(call.toolName)}. Return a stable identifier (e.g. the email) for every call.`,
      });
    }
    return deriveKeyAndSize(
      {
        toolName: call.toolName,
        turnId: call.turnId,
        scope: call.scope,
        args: call.args,
        businessKey,
      },
      { maxArgsBytes, hash },
    );
  }

  async function run<Args, Result>(
    call: Call<Args>,
    fn: ToolFunction<Args, Result>,
    toolPolicy: ToolPolicy<Args, Result> = NO_POLICY as ToolPolicy<Args, Result>,
  ): Promise<IdempotentResult<Result>> {
    if (typeof fn !== 'function') {
      throw new InvalidInputError({
        field: 'fn',
        message: 'The tool function must be a function.',
      });
    }
    const policy = policyFor(toolPolicy);
    const { key, fingerprint, argsBytes } = derive(call, policy);
    // An in-progress record is kept a whole ttl past its first lease, so that a holder that dies
    // leaves a stale record for the next retry to find (never one that expired with its lease,
    // which would let the retry run the effect again blindly).
    const claimTtl = policy.ttl + policy.lease;
    const startedAt = Date.now();
    let waitedMs = 0;
    let finished = false;

    /** Emit the call's one event. */
    const finish = (outcome: CallOutcome, errorCode?: string, resultBytes?: number) => {
      if (finished) return;
      finished = true;
      if (onEvent === undefined) return;
      const endedAt = Date.now();
      const event: IdempotencyEvent = {
        key,
        toolName: call.toolName,
        scope: call.scope,
        turnId: call.turnId,
        outcome,
        store: store.name,
        startedAt,
        endedAt,
        durationMs: endedAt - startedAt,
        argsFingerprint: fingerprint,
        argsBytes,
      };
      if (waitedMs > 0) event.waitedMs = waitedMs;
      if (errorCode !== undefined) event.errorCode = errorCode;
      if (resultBytes !== undefined) event.resultBytes = resultBytes;
      if (exposeArgs) event.args = call.args;
      emit(event);
    };
    const fail = (outcome: CallOutcome, error: IdempotencyError, resultBytes?: number): never => {
      finish(outcome, error.code, resultBytes);
      throw error;
    };
    const storeCall = async <T>(what: string, op: () => Promise<T>): Promise<T> => {
      try {
        return await op();
      } catch (cause) {
        if (IdempotencyError.isInstance(cause)) throw cause;
        throw new StoreUnavailableError({
          key,
          cause,
          message: `The idempotency store (${store.name}) failed during ${what}: ${describeError(cause).message}. The tool did not run; retry the same call later.`,
        });
      }
    };
    const meta = {
      toolName: call.toolName,
      ...(call.scope === undefined ? {} : { scope: call.scope }),
      ...(call.turnId === undefined ? {} : { turnId: call.turnId }),
    };

    const replay = (record: IdempotencyRecord): IdempotentResult<Result> => {
      let decoded: { stored: StoredOutcome; json: string };
      try {
        decoded = decode(codec, openedOutcomes, key, record);
      } catch (error) {
        if (RecordIntegrityError.isInstance(error)) return fail('integrity-failed', error);
        throw error;
      }
      const { stored, json } = decoded;
      const outcome = waitedMs > 0 ? 'waited' : 'replayed';
      const resultBytes = Buffer.byteLength(json);
      if (record.state === 'failed' || stored.e !== undefined) {
        const original = stored.e ?? { name: 'Error', message: 'unknown error' };
        fail(
          'failed',
          new ReplayedFailureError({
            key,
            originalName: original.name,
            originalMessage: original.message,
            originalCode: original.code,
            message: `This call failed before with a terminal error and is not run again: ${original.name}: ${original.message}. Change the arguments to try something else.`,
          }),
          resultBytes,
        );
      }
      finish(outcome, undefined, resultBytes);
      return { value: stored.v as Result, replayed: true, key, outcome };
    };

    const execute = async (token: string): Promise<IdempotentResult<Result>> => {
      const controller = new AbortController();
      const loseLease = (message: string) =>
        controller.abort(new PersistFailedError({ key, reason: 'lease_lost', message }));
      // Renew every lease/3 without waiting for the previous renewal (one that hangs must not
      // stop the others). The tool is told (its signal aborts) when the store says another
      // attempt owns the record, and also when no renewal got through for a whole lease: the
      // record may then be stale and taken over, so its side effects should stop.
      let lastRenewed = Date.now();
      const renewTimer = setInterval(
        () => {
          if (controller.signal.aborted) return;
          if (Date.now() - lastRenewed > policy.lease) {
            loseLease(
              `No lease renewal of ${key} reached the store for ${policy.lease} ms: another attempt may take the call over. Stop side effects.`,
            );
            return;
          }
          store.renew(key, token, policy.lease).then(
            (owned) => {
              if (owned) lastRenewed = Date.now();
              else loseLease(`Another attempt took over ${key} while this one ran.`);
            },
            () => {
              // The store is unreachable: the next tick tries again (until a lease has passed).
            },
          );
        },
        Math.max(1, Math.floor(policy.lease / 3)),
      );
      renewTimer.unref?.();
      const stopRenew = () => clearInterval(renewTimer);

      let value: Result;
      try {
        const context: ExecutionContext = {
          key,
          toolName: call.toolName,
          turnId: call.turnId,
          scope: call.scope,
          signal: controller.signal,
        };
        // The tool runs inside its context: idempotentFetch, idempotencyHeaders and vendorCall
        // find its key without being handed `ctx`.
        value = await withExecutionContext(context, () => fn(call.args, context));
      } catch (error) {
        stopRenew();
        const passedOn = NotAnOutcome.isInstance(error);
        let terminal = false;
        try {
          terminal = !passedOn && policy.isTerminalError?.(error) === true;
        } catch {
          // A predicate that throws decides nothing: the error counts as retryable.
        }
        if (terminal) {
          const e = describeError(error);
          let json = JSON.stringify({ e } satisfies StoredOutcome);
          if (Buffer.byteLength(json) > maxResultBytes) {
            // Keep the failure, not a huge message: a stored error obeys maxResultBytes too.
            e.message = `${e.message.slice(0, 1000)}… (truncated: over maxResultBytes)`;
            e.name = e.name.slice(0, 200);
            if (e.code !== undefined) e.code = e.code.slice(0, 200);
            json = JSON.stringify({ e } satisfies StoredOutcome);
          }
          const outcome = codec.seal(key, 'failed', json);
          await store
            .complete({ key, token, state: 'failed', outcome, ttlMs: policy.ttl })
            .catch(() => false);
        } else if (policy.onToolError === 'keep' && !passedOn) {
          // The effect may have happened: leave the attempt unfinished, its lease run out now, so
          // the next retry finds it stale (reconcile, else outcome-unknown) without waiting.
          await store.renew(key, token, 1).catch(() => false);
        } else {
          // Retryable: free the key so a retry may run. If this fails the record goes stale,
          // which is the safe side (a retry meets outcome-unknown, never a blind re-run).
          await store.release(key, token).catch(() => false);
        }
        wake(key);
        finish(
          'failed',
          passedOn
            ? 'not_an_outcome'
            : IdempotencyError.isInstance(error)
              ? error.code
              : 'tool_error',
        );
        throw error;
      }
      stopRenew();

      let encoded: string;
      let refused: { message: string; cause?: unknown } | undefined;
      try {
        encoded = JSON.stringify({ v: value } satisfies StoredOutcome);
        const bytes = Buffer.byteLength(encoded);
        if (bytes > maxResultBytes) {
          refused = {
            message: `The result of ${call.toolName} is ${bytes} bytes of JSON; the limit is ${maxResultBytes} (maxResultBytes), so it is not stored and replayed. The tool did run: its effect is kept as a failure so it is not repeated. Return a smaller result (a reference instead of the data) or raise maxResultBytes.`,
          };
        }
      } catch (cause) {
        encoded = '';
        refused = {
          cause,
          message: `The result of ${call.toolName} is not JSON (${describeError(cause).message}), so it cannot be stored and replayed. The tool did run: its effect is kept as a failure so it is not repeated. Return plain JSON from the tool.`,
        };
      }
      if (refused !== undefined) {
        const { message, cause } = refused;
        const failure = JSON.stringify({
          e: { name: 'PersistFailedError', message, code: 'invalid_result' },
        } satisfies StoredOutcome);
        await store
          .complete({
            key,
            token,
            state: 'failed',
            outcome: codec.seal(key, 'failed', failure),
            ttlMs: policy.ttl,
          })
          .catch(() => false);
        wake(key);
        return fail(
          'persist-failed',
          new PersistFailedError({ key, reason: 'invalid_result', cause, message }),
        );
      }
      let owned: boolean;
      try {
        owned = await store.complete({
          key,
          token,
          state: 'completed',
          outcome: codec.seal(key, 'completed', encoded),
          ttlMs: policy.ttl,
        });
      } catch (cause) {
        wake(key);
        return fail(
          'persist-failed',
          new PersistFailedError({
            key,
            reason: 'store_error',
            cause,
            message: `${call.toolName} ran, but its outcome could not be stored (${describeError(cause).message}). Retry the same call: it will find the unfinished attempt and not repeat the effect blindly.`,
          }),
        );
      }
      wake(key);
      if (!owned) {
        return fail(
          'persist-failed',
          new PersistFailedError({
            key,
            reason: 'lease_lost',
            message: `${call.toolName} ran, but another attempt took the call over meanwhile (the lease of ${policy.lease} ms ran out), so this outcome was not stored. Retry the same call to get the stored outcome.`,
          }),
        );
      }
      finish('executed', undefined, Buffer.byteLength(encoded));
      return { value, replayed: false, key, outcome: 'executed' };
    };

    const handleStale = async (
      record: IdempotencyRecord,
    ): Promise<IdempotentResult<Result> | 'retry'> => {
      let found: Reconciliation<Result>;
      let reconcileError: unknown;
      if (policy.reconcile !== undefined) {
        try {
          found = await policy.reconcile({
            key,
            args: call.args,
            toolName: call.toolName,
            turnId: call.turnId,
            scope: call.scope,
            record,
          });
        } catch (error) {
          // A failed look-up settles nothing: treat it as "cannot tell".
          reconcileError = error;
        }
      }
      const mayRun =
        found?.found === false || (found === undefined && policy.onStale === 'reexecute');
      if (found?.found !== true && !mayRun) {
        return fail(
          'outcome-unknown',
          new OutcomeUnknownError({
            key,
            cause: reconcileError,
            startedAt: record.createdAt,
            message: `An earlier attempt of ${call.toolName} started at ${new Date(record.createdAt).toISOString()} and never finished: its effect may or may not have happened. It was not run again. Check whether it took effect before acting; do not retry blindly.`,
          }),
        );
      }
      // An adopted value is checked before anything changes: a bad one leaves the stale record
      // as it is (the next retry asks reconcile again), never a freed key that would run again.
      let encoded = '';
      if (found?.found === true) {
        try {
          encoded = JSON.stringify({ v: found.value } satisfies StoredOutcome);
        } catch (cause) {
          throw new InvalidInputError({
            key,
            field: 'reconcile',
            cause,
            message: 'reconcile returned a value that is not JSON. Return plain JSON.',
          });
        }
        if (Buffer.byteLength(encoded) > maxResultBytes) {
          throw new InvalidInputError({
            key,
            field: 'reconcile',
            message: `reconcile returned ${Buffer.byteLength(encoded)} bytes of JSON; the limit is ${maxResultBytes} (maxResultBytes). Return a smaller value.`,
          });
        }
      }
      const token = randomUUID();
      const taken = await storeCall('takeover', () =>
        store.takeover({
          key,
          staleToken: record.token,
          token,
          leaseMs: policy.lease,
          ttlMs: claimTtl,
        }),
      );
      if (!taken) return 'retry';
      if (found?.found === true) {
        const sealed = codec.seal(key, 'completed', encoded);
        const owned = await storeCall('complete', () =>
          store.complete({ key, token, state: 'completed', outcome: sealed, ttlMs: policy.ttl }),
        );
        wake(key);
        if (!owned) return 'retry';
        finish('reconciled', undefined, Buffer.byteLength(encoded));
        return { value: found.value, replayed: true, key, outcome: 'reconciled' };
      }
      return execute(token);
    };

    /**
     * Fail-open (opt-in): the store failed on the first claim, before anything ran here. Run the
     * tool without a record; the call's one event says `unguarded`.
     */
    const runUnguarded = async (): Promise<IdempotentResult<Result>> => {
      const context: ExecutionContext = {
        key,
        toolName: call.toolName,
        turnId: call.turnId,
        scope: call.scope,
        signal: new AbortController().signal,
      };
      let value: Result;
      try {
        value = await withExecutionContext(context, () => fn(call.args, context));
      } catch (error) {
        finish('unguarded', IdempotencyError.isInstance(error) ? error.code : 'tool_error');
        throw error;
      }
      finish('unguarded');
      return { value, replayed: false, key, outcome: 'unguarded' };
    };

    const deadline = startedAt + policy.waitTimeout;
    let pollMs = 2;
    let firstClaim = true;
    /** The next claim follows a wait: it may share the re-claim of waiters woken with it. */
    let afterWait = false;
    try {
      for (;;) {
        const token = randomUUID();
        let claim: ClaimResult;
        try {
          const input: ClaimInput = {
            key,
            fingerprint,
            token,
            leaseMs: policy.lease,
            ttlMs: claimTtl,
            meta,
          };
          const shared = afterWait;
          afterWait = false;
          claim = await storeCall('claim', () => (shared ? reclaim(input) : store.claim(input)));
        } catch (error) {
          // Only the first look-up, and only an unreachable store: after it, a record may exist
          // (a running duplicate, a stale attempt) and running unguarded could repeat an effect.
          if (
            firstClaim &&
            policy.onStoreUnavailable === 'fail-open' &&
            StoreUnavailableError.isInstance(error)
          ) {
            return await runUnguarded();
          }
          throw error;
        }
        firstClaim = false;
        switch (claim.status) {
          case 'acquired':
            return await execute(token);
          case 'completed':
            return replay(claim.record);
          case 'drift':
            if (policy.onDrift === 'replay' && claim.record.state !== 'in_progress') {
              return replay(claim.record);
            }
            return fail(
              'drift',
              new DriftError({
                key,
                fingerprint,
                storedFingerprint: claim.record.fingerprint,
                message: `${call.toolName} was already called with this business key but other arguments. Nothing ran. Repeat the original arguments, or use a new business key for a new operation.`,
              }),
            );
          case 'stale': {
            const result = await handleStale(claim.record);
            if (result !== 'retry') return result;
            continue;
          }
          case 'in_progress': {
            const now = Date.now();
            if (policy.onInProgress === 'reject' || now >= deadline) {
              return fail(
                'in-progress',
                new InProgressError({
                  key,
                  leaseExpiresAt: claim.record.leaseExpiresAt,
                  message: `${call.toolName} is already running for this call${policy.onInProgress === 'wait' ? ` and did not finish within ${policy.waitTimeout} ms` : ''}. Nothing ran again. Wait, then retry the same call to get its outcome.`,
                }),
              );
            }
            // Wake on: this process settling the key, the store's push, or an adaptive poll for
            // stores that cannot push across processes. A store that pushes is asked again when
            // the holder's lease runs out (a holder that died sends nothing), at the latest once
            // per lease of ours; the store's clock decides staleness, so an expiry that the local
            // clock already sees as past falls back to the adaptive poll.
            // The first wait is capped: a change between the claim's answer and the waiters'
            // registration is pushed to nobody, and would otherwise cost a whole lease.
            const untilStale = claim.record.leaseExpiresAt - now + 1;
            const poll = !store.capabilities.notifiesChanges
              ? pollMs
              : untilStale <= 0
                ? pollMs
                : Math.min(untilStale, policy.lease, waitedMs > 0 ? policy.lease : FIRST_WAIT_MS);
            const timeout = Math.max(1, Math.min(deadline - now, poll));
            const waits = [waitLocal(key, timeout)];
            if (store.waitForChange !== undefined) waits.push(store.waitForChange(key, timeout));
            await Promise.race(waits);
            pollMs = Math.min(pollMs * 2, 100);
            waitedMs = Date.now() - startedAt;
            afterWait = true;
            continue;
          }
        }
      }
    } catch (error) {
      // Whatever ended the call, it emits its one event (the paths above emit theirs first).
      if (!finished) {
        finish(
          StoreUnavailableError.isInstance(error)
            ? 'store-unavailable'
            : PersistFailedError.isInstance(error)
              ? 'persist-failed'
              : RecordIntegrityError.isInstance(error)
                ? 'integrity-failed'
                : 'failed',
          IdempotencyError.isInstance(error) ? error.code : 'internal_error',
        );
      }
      throw error;
    }
  }

  return {
    store,
    run,
    keyOf,
    checkPolicy: (policy) => {
      policyFor(policy as unknown as ToolPolicy);
    },
    wrap: (toolName, fn, policy) => (args, call) => {
      if (call === null || typeof call !== 'object') {
        throw new InvalidInputError({
          field: 'call',
          message: `Call the wrapped ${String(toolName)} as fn(args, { turnId, scope? }).`,
        });
      }
      return run({ toolName, turnId: call.turnId, scope: call.scope, args }, fn, policy);
    },
    vendorCall: createVendorCall(run),
  };
}
