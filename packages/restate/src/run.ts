/**
 * A side effect inside Restate's `ctx.run` that runs once across Restate's retries of the run
 * closure. Restate journals a `ctx.run` once it has its result, and replays the journal on every
 * later attempt; but a service process that dies after the effect and before Restate recorded the
 * result gets the closure run again (at-least-once). Here the closure is a lookup first: the
 * call's identity is Restate's own (the invocation id, the run's name and its occurrence in the
 * invocation), so the retried closure finds the first attempt's stored outcome, reconciles an
 * attempt that died mid-way or fails with a terminal `OutcomeUnknownError`, and sends the vendor
 * the same `Idempotency-Key`.
 */
import {
  type ExecutionContext,
  type Idempotency,
  IdempotencyError,
  type IdempotentResult,
  InvalidInputError,
  type ToolPolicy,
} from '@idempotent-tools/core';
import {
  type Context,
  type RestatePromise,
  type RunOptions,
  TerminalError,
} from '@restatedev/restate-sdk';

/** The arguments the key is derived from: which run of the name in the invocation, and `args`. */
export interface RunArgs {
  /** 0 for the first `idempotentRun` of this name in the invocation, 1 for the second... */
  occurrence: number;
  /** `options.args`, or `null`. */
  args: unknown;
}

/** Options of `idempotentRun(ctx, idempotency, name, fn, options)`. */
export interface IdempotentRunOptions<Result>
  extends Omit<ToolPolicy<RunArgs, Result>, 'businessKey'> {
  /**
   * JSON arguments that are part of the call's identity (and of `reconcile`'s context): a retry
   * of the invocation that reaches the same run with other args is drift (the handler is not
   * deterministic). Usually left out: the invocation id, name and occurrence identify the call.
   */
  args?: unknown;
  /** Tenant / user: records of one scope are invisible to another. */
  scope?: string;
  /** Restate's own options of `ctx.run` (`maxRetryAttempts`, `serde`...). */
  run?: RunOptions<Result>;
}

/** Calls of each name so far, per attempt's context (a retried attempt counts from 0 again). */
const occurrences = new WeakMap<object, Map<string, number>>();

function nextOccurrence(ctx: object, name: string): number {
  let names = occurrences.get(ctx);
  if (names === undefined) {
    names = new Map();
    occurrences.set(ctx, names);
  }
  const n = names.get(name) ?? 0;
  names.set(name, n + 1);
  return n;
}

/**
 * An error the run cannot get past by running again is terminal to Restate (it journals it
 * and stops retrying): `OutcomeUnknownError`, drift, bad input, a replayed failure. A retryable
 * one (in progress, store unavailable, the tool's own errors) is left for Restate to retry.
 */
function toRestate(error: unknown): unknown {
  if (!IdempotencyError.isInstance(error) || error.retryable) return error;
  const terminal = new TerminalError(`${error.code}: ${error.message}`, {
    errorCode: error.code === 'drift' ? 422 : 500,
    metadata: { code: error.code, ...(error.key === undefined ? {} : { key: error.key }) },
  });
  (terminal as { cause?: unknown }).cause = error;
  return terminal;
}

/** The identity `idempotentRun` gives a call: the turn is the invocation, the tool the name. */
export function runCall(ctx: Context, name: string, occurrence: number, args: unknown) {
  return {
    toolName: name,
    turnId: ctx.request().id,
    args: { occurrence, args: args === undefined ? null : args } satisfies RunArgs,
  };
}

/**
 * Run `fn` as `ctx.run(name, ...)`, idempotently: the first attempt runs it and stores its
 * outcome before Restate journals it; an attempt Restate retries because the process died after
 * the effect replays the stored outcome instead of running `fn` again. One that died while `fn`
 * ran (a stale record) goes to `options.reconcile`, else fails with `OutcomeUnknownError` as a
 * Restate `TerminalError` (retrying cannot tell whether the effect happened). `fn` gets the
 * execution context: pass `exec.key` to the vendor (`idempotencyHeaders(exec)`), the same on
 * every retry.
 *
 * ```ts
 * const receipt = await idempotentRun(ctx, idempotency, 'charge', (exec) =>
 *   bank.charge(order, { headers: idempotencyHeaders(exec) }));
 * ```
 * @throws InvalidInputError (at once) for an empty name
 */
export function idempotentRun<Result>(
  ctx: Context,
  idempotency: Idempotency,
  name: string,
  fn: (exec: ExecutionContext) => Result | Promise<Result>,
  options: IdempotentRunOptions<Result> = {},
): RestatePromise<Result> {
  if (typeof name !== 'string' || name === '' || name.length > 128) {
    throw new InvalidInputError({
      field: 'name',
      message: 'idempotentRun needs the name of the run, 1-128 characters, as ctx.run does.',
    });
  }
  const { args, scope, run: runOptions, ...policy } = options;
  idempotency.checkPolicy(policy as ToolPolicy<never, never>);
  // Counted when called, outside the closure: the handler calls its runs in the same order on
  // every attempt (Restate's determinism), so the n-th run of a name is the same call each time.
  const call = { ...runCall(ctx, name, nextOccurrence(ctx, name), args), scope };
  const action = async (): Promise<Result> => {
    let result: IdempotentResult<Result>;
    try {
      result = await idempotency.run(call, (_args, exec) => fn(exec), policy);
    } catch (error) {
      throw toRestate(error);
    }
    return result.value;
  };
  return runOptions === undefined ? ctx.run(name, action) : ctx.run(name, action, runOptions);
}

/** The idempotency key `idempotentRun` uses for the `occurrence`-th run of `name` in `ctx`. */
export function runKey(
  ctx: Context,
  idempotency: Idempotency,
  name: string,
  options: { occurrence?: number; args?: unknown; scope?: string } = {},
): string {
  const call = {
    ...runCall(ctx, name, options.occurrence ?? 0, options.args),
    scope: options.scope,
  };
  return idempotency.keyOf(call).key;
}
