/**
 * A stale record: an earlier attempt died (or stalled) mid-way, and whether its effect happened
 * is unknown. Never re-run blindly: `reconcile` looks the effect up (adopt it, or learn that it
 * certainly did not happen), `onStale: 'reexecute'` runs again only where the vendors dedupe by
 * the key, else `OutcomeUnknownError`.
 */

import { InvalidInputError, OutcomeUnknownError } from '../errors/index.js';
import { randomUUID, utf8Length } from '../runtime/index.js';
import type { IdempotencyRecord } from '../store/store.js';
import type { CallRun } from './call-run.js';
import { asStored, type StoredOutcome } from './outcome.js';
import { runTool } from './run-tool.js';
import type { IdempotentResult, Reconciliation } from './types.js';

/** How often a watched stale record is read again (a fraction of the lease). */
const WATCH_READS_PER_LEASE = 4;

/**
 * Whether the stale `record` stays as it is (same attempt, same lease: no renewal, no outcome)
 * for the policy's `settleWindow` (at least a lease), on this executor's monotonic clock. The
 * store's clock alone never decides a takeover: a store whose clock stepped forward calls a live
 * holder's record stale, but that holder renews within a third of a lease, which shows here. The
 * window also gives a request the holder sent just before it stopped the time to commit at the
 * vendor before `reconcile` asks. The first sighting of a record version is remembered per
 * executor, so a retry of the same call does not wait from the start again.
 */
async function staysStale<Args, Result>(
  run: CallRun<Args, Result>,
  record: IdempotencyRecord,
): Promise<boolean> {
  const { engine, key, policy } = run;
  const version = `${key}\u0000${record.token}\u0000${record.leaseExpiresAt}`;
  const seen = engine.staleSince.get(version) ?? engine.now();
  engine.staleSince.set(version, seen);
  const until = seen + policy.settleWindow;
  try {
    for (;;) {
      const left = until - engine.now();
      if (left <= 0) return true;
      const pause = Math.min(left, Math.ceil(policy.lease / WATCH_READS_PER_LEASE));
      await new Promise((resolve) => setTimeout(resolve, pause));
      const now = await run.storeCall('get', () => engine.store.get(key));
      if (
        now === undefined ||
        now.state !== 'in_progress' ||
        now.token !== record.token ||
        now.leaseExpiresAt !== record.leaseExpiresAt
      ) {
        engine.staleSince.delete(version);
        return false;
      }
    }
  } finally {
    if (engine.staleSince.size > 10_000) engine.staleSince.clear();
  }
}

/**
 * Settle a stale record; `'retry'`: it changed meanwhile (renewed, taken over, finished): claim
 * again.
 *
 * A policy that may run the tool again (`reconcile`, `onStale: 'reexecute'`) first watches the
 * record stay stale for the settle window (`staysStale`); the takeover is fenced besides: it fails
 * if the holder renewed or completed meanwhile.
 */
export async function settleStale<Args, Result>(
  run: CallRun<Args, Result>,
  record: IdempotencyRecord,
): Promise<IdempotentResult<Result> | 'retry'> {
  const { engine, key, call, policy } = run;
  if (policy.reconcile !== undefined || policy.onStale === 'reexecute') {
    if (!(await staysStale(run, record))) return 'retry';
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
    if (utf8Length(encoded) > engine.maxResultBytes) {
      throw new InvalidInputError({
        key,
        field: 'reconcile',
        message: `reconcile returned ${utf8Length(encoded)} bytes of JSON; the limit is ${engine.maxResultBytes} (maxResultBytes). Return a smaller value.`,
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
  run.finish('reconciled', undefined, utf8Length(encoded));
  return { value: asStored(found.value, encoded), replayed: true, key, outcome: 'reconciled' };
}
