/**
 * Policies: the executor's options and each tool's policy, checked (misspelt fields, values)
 * and resolved against the defaults once per policy object.
 */
import { InvalidInputError } from '../errors/index.js';
import { unknownOption } from '../errors/option-names.js';
import {
  type Call,
  DEFAULTS,
  type ReconcileContext,
  type Reconciliation,
  TOOL_POLICY_FIELDS,
  type ToolPolicy,
} from './types.js';

const HOUR = 60 * 60 * 1000;
/** Largest duration accepted for ttl / lease / waitTimeout: 366 days. */
const MAX_DURATION = 366 * 24 * HOUR;
/** Largest accepted `maxArgsBytes` / `maxResultBytes`: 512 MiB (a JavaScript string's limit). */
const MAX_BYTES = 512 * 1024 * 1024;

function checkDuration(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_DURATION) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number of milliseconds between 1 and ${MAX_DURATION} (366 days), got ${String(value)}.`,
    });
  }
  return value;
}

/**
 * Shortest lease accepted: 1 s. A lease is renewed every third of it while the tool runs, and a
 * holder gives up a tenth of it early; under a second, an event-loop stall of a few hundred ms
 * loses the call. A smaller number is most likely seconds written for milliseconds.
 */
export const MIN_LEASE_MS = 1_000;

function checkLease(value: unknown): number {
  const lease = checkDuration('lease', value);
  if (lease < MIN_LEASE_MS) {
    throw new InvalidInputError({
      field: 'lease',
      message: `lease is in milliseconds and must be at least ${MIN_LEASE_MS} (1 s), got ${lease}${lease <= 600 ? `: for ${lease} seconds write ${lease * 1000}` : ''}.`,
    });
  }
  return lease;
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

export interface ResolvedPolicy<Args, Result> {
  ttl: number;
  lease: number;
  waitTimeout: number;
  /** How long a stale record must be seen unchanged before it is taken over (>= lease). */
  settleWindow: number;
  onDrift: 'reject' | 'replay';
  onInProgress: 'wait' | 'reject';
  onStale: 'outcome-unknown' | 'reexecute';
  businessKey: ((args: Args, call: Call<Args>) => unknown) | undefined;
  reconcile: ((context: ReconcileContext<Args>) => Promise<Reconciliation<Result>>) | undefined;
  isTerminalError: ((error: unknown) => boolean) | undefined;
  onReplay: ToolPolicy<Args, Result>['onReplay'];
  onToolError: 'auto' | 'release' | 'keep';
  vendorDedupes: boolean;
  onStoreUnavailable: 'fail-closed' | 'fail-open';
}

export function resolvePolicy<Args, Result>(
  defaults: PolicyDefaults,
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
  const lease = checkLease(policy.lease ?? defaults.lease ?? DEFAULTS.lease);
  const settleWindow = policy.settleWindow ?? defaults.settleWindow;
  return {
    ttl: checkDuration('ttl', policy.ttl ?? defaults.ttl ?? DEFAULTS.ttl),
    lease,
    settleWindow: Math.max(
      lease,
      settleWindow === undefined ? lease : checkDuration('settleWindow', settleWindow),
    ),
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
    onReplay: fn('onReplay', policy.onReplay),
    onToolError: checkChoice('onToolError', policy.onToolError ?? defaults.onToolError ?? 'auto', [
      'auto',
      'release',
      'keep',
    ]),
    vendorDedupes: policy.vendorDedupes ?? defaults.vendorDedupes ?? false,
    onStoreUnavailable: checkChoice(
      'onStoreUnavailable',
      policy.onStoreUnavailable ?? defaults.onStoreUnavailable ?? DEFAULTS.onStoreUnavailable,
      ['fail-closed', 'fail-open'],
    ),
  };
}

export function checkBytes(field: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_BYTES) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a whole number of bytes between 1 and ${MAX_BYTES}, got ${String(value)}.`,
    });
  }
  return value;
}

/** The executor's defaults: every field of a policy but the per-tool ones. */
export type PolicyDefaults = Omit<ToolPolicy, 'businessKey' | 'reconcile' | 'onReplay'>;

/** The policy of a call that gives none. */
export const NO_POLICY: object = Object.freeze({});

/**
 * The resolved policy of each policy object, validated once (adapters pass the same object for
 * every call of a tool); a policy object changed after its first use keeps its first reading.
 * Validates the defaults too, so a bad option fails when the executor is made.
 */
export function createPolicies(defaults: PolicyDefaults) {
  const defaultPolicy = resolvePolicy<unknown, unknown>(defaults, {});
  const resolved = new WeakMap<object, ResolvedPolicy<unknown, unknown>>();
  return function policyFor<Args, Result>(
    toolPolicy: ToolPolicy<Args, Result>,
  ): ResolvedPolicy<Args, Result> {
    if ((toolPolicy as object) === NO_POLICY) return defaultPolicy as ResolvedPolicy<Args, Result>;
    if (toolPolicy === null || typeof toolPolicy !== 'object') {
      throw new InvalidInputError({
        field: 'policy',
        message: 'A tool policy is an object, e.g. { ttl: 3600000 }.',
      });
    }
    let policy = resolved.get(toolPolicy) as ResolvedPolicy<Args, Result> | undefined;
    if (policy === undefined) {
      policy = resolvePolicy(defaults, toolPolicy);
      resolved.set(toolPolicy, policy as ResolvedPolicy<unknown, unknown>);
    }
    return policy;
  };
}
