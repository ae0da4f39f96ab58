/**
 * The state machine of one call (design section 6, docs/design.md): claim, then act on the one
 * answer, until the call has an outcome. Each answer's step lives in its own module: replay,
 * running the tool, waiting for a duplicate, settling a stale attempt, fail-open.
 */

import {
  DriftError,
  IdempotencyError,
  InProgressError,
  PersistFailedError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '../errors/index.js';
import { randomUUID } from '../runtime/index.js';
import type { ClaimInput, ClaimResult } from '../store/store.js';
import type { CallRun } from './call-run.js';
import { runUnguarded } from './fail-open.js';
import { replay } from './replay.js';
import { runTool, settleWriteBound } from './run-tool.js';
import { settleStale } from './stale.js';
import type { IdempotentResult } from './types.js';
import { newWaitState, type WaitState, waitOnce } from './wait.js';

/** Pauses before a failed claim is sent again with the same token, in ms. */
const CLAIM_RETRIES_MS = [25, 100, 400];

/**
 * The claim, sent again with the same token when the store fails (a lost reply, a dropped
 * connection, a timeout): a claim that landed answers `acquired` to its own token. When every
 * attempt failed, a claim that may have landed is released best-effort (nothing ran under it),
 * so the key is not left stuck until its lease runs out and beyond. The first attempt is sent
 * without a wrapper (the common case costs one await); only a failure goes the slow way.
 */
async function claimWithRetries<Args, Result>(
  run: CallRun<Args, Result>,
  input: ClaimInput,
  shared: boolean,
): Promise<ClaimResult> {
  const { engine } = run;
  try {
    return await (shared ? engine.reclaim(input) : engine.store.claim(input));
  } catch (error) {
    return claimAgain(run, input, run.storeError('claim', error));
  }
}

/** The first claim failed with `error` (already typed): retry it, or release and throw. */
async function claimAgain<Args, Result>(
  run: CallRun<Args, Result>,
  input: ClaimInput,
  error: unknown,
): Promise<ClaimResult> {
  const { engine } = run;
  for (let attempt = 0; ; attempt++) {
    const pause = CLAIM_RETRIES_MS[attempt];
    if (!StoreUnavailableError.isInstance(error) || pause === undefined) {
      releaseOrphan(run, input.key, input.token);
      throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
    try {
      return await run.storeCall('claim', () => engine.store.claim(input));
    } catch (next) {
      error = next;
    }
  }
}

/**
 * A claim that may have landed though no attempt to send it got an answer: nothing ran under
 * it, so it must never leave the key to go stale (a retry would meet outcome-unknown for a call
 * that never ran). Released in the background, sent again while the store fails, for as long as
 * a settling write is (`settleWriteBound`); meanwhile a call of this executor that meets the
 * record releases it at once (`releaseMet`).
 */
function releaseOrphan<Args, Result>(run: CallRun<Args, Result>, key: string, token: string) {
  const { engine } = run;
  engine.orphans.set(key, token);
  const until = engine.now() + settleWriteBound(run.policy.lease);
  const forget = () => {
    if (engine.orphans.get(key) === token) engine.orphans.delete(key);
  };
  const attempt = (pause: number) => {
    engine.store.release(key, token).then(forget, () => {
      if (engine.orphans.get(key) !== token || engine.now() + pause >= until) return forget();
      setTimeout(() => attempt(Math.min(pause * 2, 5_000)), pause).unref?.();
    });
  };
  attempt(100);
}

/** A record held by an orphaned claim of this executor: release it now (true), or not ours. */
async function releaseMet<Args, Result>(
  run: CallRun<Args, Result>,
  record: { token: string },
): Promise<boolean> {
  const { engine, key } = run;
  if (engine.orphans.get(key) !== record.token) return false;
  await run.storeCall('release', () => engine.store.release(key, record.token));
  if (engine.orphans.get(key) === record.token) engine.orphans.delete(key);
  return true;
}

export async function runClaimLoop<Args, Result>(
  run: CallRun<Args, Result>,
): Promise<IdempotentResult<Result>> {
  const { engine, key, fingerprint, call, policy } = run;
  let wait: WaitState | undefined;
  let firstClaim = true;
  /** The next claim follows a wait: it may share the re-claim of waiters woken with it. */
  let afterWait = false;
  try {
    for (;;) {
      const token = randomUUID();
      const input: ClaimInput = {
        key,
        fingerprint,
        token,
        leaseMs: policy.lease,
        ttlMs: run.claimTtl,
        meta: run.meta,
      };
      // The lease is counted from the first send: a claim sent again reached the store no sooner.
      const sentAt = engine.now();
      let claim: ClaimResult;
      const shared = afterWait;
      afterWait = false;
      try {
        claim = await claimWithRetries(run, input, shared);
      } catch (error) {
        // Only the first look-up, and only an unreachable store: after it, a record may exist (a
        // running duplicate, a stale attempt) and running unguarded could repeat an effect.
        if (
          firstClaim &&
          policy.onStoreUnavailable === 'fail-open' &&
          StoreUnavailableError.isInstance(error)
        ) {
          return await runUnguarded(run);
        }
        throw error;
      }
      firstClaim = false;
      switch (claim.status) {
        case 'acquired':
          return await runTool(run, token, sentAt);
        case 'completed':
          return replay(run, claim.record, shared);
        case 'drift':
          if (policy.onDrift === 'replay' && claim.record.state !== 'in_progress') {
            return replay(run, claim.record, shared);
          }
          return run.fail(
            'drift',
            new DriftError({
              key,
              toolName: call.toolName,
              fingerprint,
              storedFingerprint: claim.record.fingerprint,
            }),
          );
        case 'stale': {
          if (await releaseMet(run, claim.record)) continue;
          const settled = await settleStale(run, claim.record);
          if (settled !== 'retry') return settled;
          continue;
        }
        case 'in_progress': {
          if (await releaseMet(run, claim.record)) continue;
          wait ??= newWaitState(run as CallRun<unknown, unknown>);
          if (policy.onInProgress === 'reject' || engine.now() >= wait.deadline) {
            return run.fail(
              'in-progress',
              new InProgressError({
                key,
                toolName: call.toolName,
                leaseExpiresAt: claim.record.leaseExpiresAt,
                waitedMs: policy.onInProgress === 'wait' ? policy.waitTimeout : undefined,
              }),
            );
          }
          await waitOnce(run as CallRun<unknown, unknown>, claim.record, wait);
          afterWait = true;
          continue;
        }
      }
    }
  } catch (error) {
    // Whatever ended the call, it emits its one event (the paths above emit theirs first).
    if (!run.finished) {
      run.finish(
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
