/**
 * Running the tool under an acquired claim: the lease renewed while it runs, then its outcome
 * settled. A result is persisted before it is returned; an error releases the claim (a retry may
 * run again), keeps the attempt unfinished (`onToolError: 'keep'`: the effect may have happened),
 * or is stored when it is terminal.
 */
import { IdempotencyError, PersistFailedError } from '../errors/index.js';
import { NotAnOutcome } from '../not-an-outcome.js';
import { withExecutionContext } from '../vendor.js';
import type { CallRun } from './call-run.js';
import { holdLease } from './lease.js';
import { describeError, type StoredOutcome } from './outcome.js';
import type { ExecutionContext, IdempotentResult } from './types.js';

export async function runTool<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
): Promise<IdempotentResult<Result>> {
  const { engine, key, call, policy } = run;
  const { store } = engine;
  const lease = holdLease(store, key, token, policy.lease);
  let value: Result;
  try {
    const context: ExecutionContext = {
      key,
      toolName: call.toolName,
      turnId: call.turnId,
      scope: call.scope,
      signal: lease.signal,
    };
    // The tool runs inside its context: idempotentFetch, idempotencyHeaders and vendorCall
    // find its key without being handed `ctx`.
    value = await withExecutionContext(context, () => run.fn(call.args, context));
  } catch (error) {
    lease.stop();
    await settleError(run, token, error);
    throw error;
  }
  lease.stop();
  return persist(run, token, value);
}

/** The tool threw: store it (terminal), keep the attempt unfinished, or release the claim. */
async function settleError<Args, Result>(
  run: CallRun<Args, Result>,
  token: string,
  error: unknown,
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
    if (Buffer.byteLength(json) > engine.maxResultBytes) {
      // Keep the failure, not a huge message: a stored error obeys maxResultBytes too.
      e.message = `${e.message.slice(0, 1000)}… (truncated: over maxResultBytes)`;
      e.name = e.name.slice(0, 200);
      if (e.code !== undefined) e.code = e.code.slice(0, 200);
      json = JSON.stringify({ e } satisfies StoredOutcome);
    }
    const outcome = engine.codec.seal(key, 'failed', json);
    await store
      .complete({ key, token, state: 'failed', outcome, ttlMs: policy.ttl })
      .catch(() => false);
  } else if (policy.onToolError === 'keep' && !passedOn) {
    // The effect may have happened: leave the attempt unfinished, its lease run out now, so the
    // next retry finds it stale (reconcile, else outcome-unknown) without waiting.
    await store.renew(key, token, 1).catch(() => false);
  } else {
    // Retryable: free the key so a retry may run. If this fails the record goes stale, which is
    // the safe side (a retry meets outcome-unknown, never a blind re-run).
    await store.release(key, token).catch(() => false);
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
    const bytes = Buffer.byteLength(encoded);
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
  if (refused !== undefined) {
    const failure = JSON.stringify({
      e: { name: 'PersistFailedError', message: refused.message, code: 'invalid_result' },
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
    engine.waiters.wake(key);
    return run.fail('persist-failed', refused);
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
    engine.waiters.wake(key);
    return run.fail(
      'persist-failed',
      new PersistFailedError({ key, reason: 'store_error', toolName: call.toolName, cause }),
    );
  }
  engine.waiters.wake(key);
  if (!owned) {
    return run.fail(
      'persist-failed',
      new PersistFailedError({
        key,
        reason: 'lease_lost',
        toolName: call.toolName,
        leaseMs: policy.lease,
      }),
    );
  }
  run.finish('executed', undefined, Buffer.byteLength(encoded));
  return { value, replayed: false, key, outcome: 'executed' };
}
