/**
 * Running the tool under an acquired claim: the lease renewed while it runs, then its outcome
 * settled. A result is persisted before it is returned; an error releases the claim (a retry may
 * run again), keeps the attempt unfinished (`onToolError: 'keep'`: the effect may have happened),
 * or is stored when it is terminal.
 */

import { IdempotencyError, InvalidInputError, PersistFailedError } from '../errors/index.js';
import { isNode, utf8Length } from '../runtime/index.js';
import type { CallRun } from './call-run.js';
import { effectsOf, runInContext, type SentEffects } from './context.js';
import { holdLease, type Lease } from './lease.js';
import { NotAnOutcome } from './not-an-outcome.js';
import { asStored, describeError, type StoredOutcome } from './outcome.js';
import type { ExecutionContext, IdempotentResult } from './types.js';

/**
 * @param securedAt the monotonic clock's reading when the claim (or takeover) that acquired
 *   `token` was sent: the lease is counted from there
 */
export async function runTool<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  securedAt: number,
): Promise<IdempotentResult<Result>> {
  const { engine, key, call, policy } = run;
  const { store } = engine;
  const lease = holdLease(store, key, token, policy.lease, securedAt, engine.now);
  let value: Result;
  const context = new ToolContext(key, call.toolName, call.turnId, call.scope, lease);
  try {
    // The tool runs inside its context: idempotentFetch, idempotencyHeaders and vendorCall
    // find its key without being handed `ctx`.
    value = await runInContext(context, run.around, () => run.fn(call.args, context));
  } catch (error) {
    lease.stop();
    await settleError(run, token, error, effectsOf(context));
    throw error;
  }
  lease.stop();
  return persist(run, token, value);
}

/**
 * What the tool gets as `ctx`. A class: its `signal` is a getter (the lease makes the signal
 * only when asked), and a getter in an object literal costs a runtime call per call.
 */
class ToolContext implements ExecutionContext {
  readonly stillOwned: () => boolean;
  readonly #lease: Lease;
  constructor(
    readonly key: string,
    readonly toolName: string,
    readonly turnId: string | undefined,
    readonly scope: string | undefined,
    lease: Lease,
  ) {
    this.#lease = lease;
    this.stillOwned = lease.stillOwned;
  }
  get signal(): AbortSignal {
    return this.#lease.signal;
  }
}

/** Pauses between attempts of a fenced write, in ms (the last one repeats). */
const WRITE_RETRIES_MS = [25, 100, 400, 1_000];

/**
 * How long the write that settles an attempt (`complete`, `release`, the `renew` that keeps it)
 * is sent again while the store fails: twice the lease, at least 30 s (docs/design.md, "Every
 * store operation is safe to send again"). Past the lease too: each write is fenced by the
 * token, so the store refuses it once another attempt took the call over, and until then it is
 * this attempt's to settle.
 */
export const settleWriteBound = (leaseMs: number): number => Math.max(2 * leaseMs, 30_000);

/**
 * A fenced write that settles the attempt, sent again while it fails (each is safe to repeat: a
 * store answers a write it already applied for this token as applied), until the store answers
 * (applied, or fenced out) or `settleWriteBound` has passed; then the last error is thrown.
 */
async function fencedWrite<T>(run: CallRun<unknown, unknown>, write: () => Promise<T>): Promise<T> {
  const { engine } = run;
  const until = engine.now() + settleWriteBound(run.policy.lease);
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      // The store refused the input itself (too large, malformed): sending it again changes nothing.
      if (InvalidInputError.isInstance(error)) throw error;
      const pause = WRITE_RETRIES_MS[Math.min(attempt, WRITE_RETRIES_MS.length - 1)] as number;
      if (engine.now() + pause >= until) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * Whether a tool error keeps the attempt unfinished (its effect may have happened) rather than
 * releasing the claim. `auto`: keep when a request left for a vendor not declared to dedupe by
 * the key (a keyed request of the vendor helpers, or any other request seen leaving: plain
 * `fetch`, `node:http`); release when nothing left, when every vendor dedupes, or when the
 * effects are in the ledger (a retry meets the ledger's own record first). Off Node, where no
 * request is seen leaving (`vendor-calls/sent-requests.ts`), `auto` cannot tell an error before
 * the effect from one after it: it keeps the attempt unless every vendor dedupes by the key.
 */
function keepsAttempt(
  onToolError: 'auto' | 'release' | 'keep',
  vendorDedupes: boolean,
  sent: SentEffects,
): boolean {
  if (onToolError !== 'auto') return onToolError === 'keep';
  if (!isNode) return !vendorDedupes;
  return (sent.keyed > 0 || sent.requests > 0) && !vendorDedupes;
}

/** The tool threw: store it (terminal), keep the attempt unfinished, or release the claim. */
async function settleError<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  error: unknown,
  sent: SentEffects,
): Promise<void> {
  const { engine, key, policy } = run;
  const { store } = engine;
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
    if (utf8Length(json) > engine.maxResultBytes) {
      // Keep the failure, not a huge message: a stored error obeys maxResultBytes too.
      e.message = `${e.message.slice(0, 1000)}… (truncated: over maxResultBytes)`;
      e.name = e.name.slice(0, 200);
      if (e.code !== undefined) e.code = e.code.slice(0, 200);
      json = JSON.stringify({ e } satisfies StoredOutcome);
    }
    const outcome = engine.codec.seal(key, 'failed', json);
    await fencedWrite(run as CallRun<unknown, unknown>, () =>
      store.complete({ key, token, state: 'failed', outcome, ttlMs: policy.ttl }),
    ).catch(() => false);
  } else if (!passedOn && keepsAttempt(policy.onToolError, policy.vendorDedupes, sent)) {
    // The effect may have happened: leave the attempt unfinished, its lease run out now, so the
    // next retry finds it stale (reconcile, else outcome-unknown) without waiting.
    await fencedWrite(run as CallRun<unknown, unknown>, () => store.renew(key, token, 1)).catch(
      () => false,
    );
  } else {
    // Retryable: free the key so a retry may run. If this fails the record goes stale, which is
    // the safe side (a retry meets outcome-unknown, never a blind re-run).
    await fencedWrite(run as CallRun<unknown, unknown>, () => store.release(key, token)).catch(
      () => false,
    );
  }
  engine.waiters.wake(key);
  run.finish(
    'failed',
    passedOn ? 'not_an_outcome' : IdempotencyError.isInstance(error) ? error.code : 'tool_error',
  );
}

/** The result, stored before it is returned (as a failure when it cannot be stored). */
async function persist<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  value: Result,
): Promise<IdempotentResult<Result>> {
  const { engine, key, call, policy } = run;
  const { store, codec, maxResultBytes } = engine;
  let encoded = '';
  let refused: PersistFailedError | undefined;
  try {
    encoded = JSON.stringify({ v: value } satisfies StoredOutcome);
    // UTF-8 takes at most 3 bytes per UTF-16 code unit: a short text needs no count.
    const bytes = encoded.length * 3 <= maxResultBytes ? 0 : utf8Length(encoded);
    if (bytes > maxResultBytes) {
      refused = new PersistFailedError({
        key,
        reason: 'invalid_result',
        toolName: call.toolName,
        resultBytes: bytes,
        limit: maxResultBytes,
      });
    }
  } catch (cause) {
    refused = new PersistFailedError({
      key,
      reason: 'invalid_result',
      toolName: call.toolName,
      cause,
    });
  }
  let outcome = '';
  if (refused === undefined) {
    outcome = codec.seal(key, 'completed', encoded);
    refused = overStoreLimit(run, outcome);
  }
  if (refused !== undefined) return keepRefusal(run, token, refused);
  let owned: boolean | 'gone' | 'taken';
  try {
    owned = await fencedWrite(run as CallRun<unknown, unknown>, () =>
      store.complete({ key, token, state: 'completed', outcome, ttlMs: policy.ttl }),
    );
  } catch (cause) {
    if (InvalidInputError.isInstance(cause)) {
      // The store refused the outcome itself (over its item limit): kept as a failure.
      return keepRefusal(
        run,
        token,
        new PersistFailedError({
          key,
          reason: 'invalid_result',
          toolName: call.toolName,
          cause,
          store: store.name,
          resultBytes: utf8Length(outcome),
          limit: store.capabilities.maxOutcomeBytes,
        }),
      );
    }
    engine.waiters.wake(key);
    return run.fail(
      'persist-failed',
      new PersistFailedError({ key, reason: 'store_error', toolName: call.toolName, cause }),
    );
  }
  if (!owned) owned = await completedByThisAttempt(run, token, outcome);
  engine.waiters.wake(key);
  if (owned !== true) {
    return run.fail(
      'persist-failed',
      new PersistFailedError({
        key,
        reason: 'lease_lost',
        toolName: call.toolName,
        leaseMs: policy.lease,
        lost: owned === 'gone' ? 'record-gone' : 'at-persist',
      }),
    );
  }
  run.finish('executed', undefined, run.observed ? utf8Length(encoded) : undefined);
  return { value: asStored(value, encoded), replayed: false, key, outcome: 'executed' };
}

/** An outcome over the store's own limit (`capabilities.maxOutcomeBytes`), refused before it is sent. */
function overStoreLimit<Args, Result>(
  run: CallRun<Args, Result>,
  outcome: string,
): PersistFailedError | undefined {
  const { store } = run.engine;
  const limit = store.capabilities.maxOutcomeBytes;
  if (limit === undefined || outcome.length * 3 <= limit) return undefined;
  const bytes = utf8Length(outcome);
  if (bytes <= limit) return undefined;
  return new PersistFailedError({
    key: run.key,
    reason: 'invalid_result',
    toolName: run.call.toolName,
    resultBytes: bytes,
    limit,
    store: store.name,
  });
}

/**
 * A result that cannot be stored (not JSON, over `maxResultBytes` or the store's limit): the tool
 * ran, so the refusal is kept as the call's failure (a retry replays it, never runs again).
 */
async function keepRefusal<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  refused: PersistFailedError,
): Promise<IdempotentResult<Result>> {
  const { engine, key, policy } = run;
  const failure = JSON.stringify({
    e: { name: 'PersistFailedError', message: refused.message, code: 'invalid_result' },
  } satisfies StoredOutcome);
  const outcome = engine.codec.seal(key, 'failed', failure);
  await fencedWrite(run as CallRun<unknown, unknown>, () =>
    engine.store.complete({ key, token, state: 'failed', outcome, ttlMs: policy.ttl }),
  ).catch(() => false);
  engine.waiters.wake(key);
  return run.fail('persist-failed', refused);
}

/**
 * `complete` was refused: what really happened. A store that applied the same complete before
 * (its reply was lost, the write was sent again) holds this attempt's outcome: success. Else the
 * record is gone (expired, or lost by a store restarted without persistence) or another attempt
 * took the call over.
 */
async function completedByThisAttempt<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  outcome: string,
): Promise<true | 'gone' | 'taken'> {
  const record = await run.engine.store.get(run.key).catch(() => undefined);
  if (record === undefined) return 'gone';
  return record.token === token && record.state === 'completed' && record.outcome === outcome
    ? true
    : 'taken';
}
