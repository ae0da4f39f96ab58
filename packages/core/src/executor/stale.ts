/**
 * A stale record: an earlier attempt died (or stalled) mid-way, and whether its effect happened
 * is unknown. Never re-run blindly: `reconcile` looks the effect up (adopt it, or learn that it
 * certainly did not happen), `onStale: 'reexecute'` runs again only where the vendors dedupe by
 * the key, else `OutcomeUnknownError`.
 */
import { randomUUID } from 'node:crypto';
import { InvalidInputError, OutcomeUnknownError } from '../errors/index.js';
import type { IdempotencyRecord } from '../store.js';
import type { CallRun } from './call-run.js';
import { leaseMargin } from './lease.js';
import { asStored, type StoredOutcome } from './outcome.js';
import { runTool } from './run-tool.js';
import type { IdempotentResult, Reconciliation } from './types.js';

/**
 * Settle a stale record; `'retry'`: it changed meanwhile (taken over, finished): claim again.
 *
 * A policy that may run the tool again (`reconcile`, `onStale: 'reexecute'`) first waits a grace
 * period past the lease (`leaseMargin`): the holder stopped believing it owned the call a margin
 * before the store's lease ran out; the grace gives a request it sent just before that as long
 * again to reach the vendor before `reconcile` asks, and a holder that was only slow the time to
 * finish (the takeover is fenced: it fails if the holder renewed or completed meanwhile).
 */
export async function settleStale<Args, Result>(
  run: CallRun<Args, Result>,
  record: IdempotencyRecord,
): Promise<IdempotentResult<Result> | 'retry'> {
  const { engine, key, call, policy } = run;
  if (policy.reconcile !== undefined || policy.onStale === 'reexecute') {
    await new Promise((resolve) => setTimeout(resolve, leaseMargin(policy.lease)));
  }
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
  const mayRun = found?.found === false || (found === undefined && policy.onStale === 'reexecute');
  if (found?.found !== true && !mayRun) {
    return run.fail(
      'outcome-unknown',
      new OutcomeUnknownError({
        key,
        cause: reconcileError,
        toolName: call.toolName,
        startedAt: record.createdAt,
      }),
    );
  }
  // An adopted value is checked before anything changes: a bad one leaves the stale record as
  // it is (the next retry asks reconcile again), never a freed key that would run again.
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
    if (Buffer.byteLength(encoded) > engine.maxResultBytes) {
      throw new InvalidInputError({
        key,
        field: 'reconcile',
        message: `reconcile returned ${Buffer.byteLength(encoded)} bytes of JSON; the limit is ${engine.maxResultBytes} (maxResultBytes). Return a smaller value.`,
      });
    }
  }
  const { store } = engine;
  const token = randomUUID();
  const securedAt = engine.now();
  const taken = await run.storeCall('takeover', () =>
    store.takeover({
      key,
      staleToken: record.token,
      token,
      leaseMs: policy.lease,
      ttlMs: run.claimTtl,
    }),
  );
  if (!taken) return 'retry';
  if (found?.found !== true) return runTool(run, token, securedAt);
  const sealed = engine.codec.seal(key, 'completed', encoded);
  const owned = await run.storeCall('complete', () =>
    store.complete({ key, token, state: 'completed', outcome: sealed, ttlMs: policy.ttl }),
  );
  engine.waiters.wake(key);
  if (!owned) return 'retry';
  run.finish('reconciled', undefined, Buffer.byteLength(encoded));
  return { value: asStored(found.value, encoded), replayed: true, key, outcome: 'reconciled' };
}
