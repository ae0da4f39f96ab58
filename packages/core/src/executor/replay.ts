/**
 * Replay: a finished record's stored outcome, opened and checked, returned with
 * `replayed: true`; a stored terminal error is thrown again as `ReplayedFailureError`.
 */

import { RecordIntegrityError, ReplayedFailureError } from '../errors/index.js';
import { utf8Length } from '../runtime/index.js';
import type { IdempotencyRecord } from '../store/store.js';
import type { CallRun } from './call-run.js';
import { decode, type StoredOutcome } from './outcome.js';
import type { IdempotentResult, ReplayContext } from './types.js';

/**
 * @param shared whether `record` is one object shared by the waiters woken together (then it is
 *   opened once for all of them)
 */
export function replay<Args, Result>(
  run: CallRun<Args, Result>,
  record: IdempotencyRecord,
  shared = false,
): IdempotentResult<Result> | Promise<IdempotentResult<Result>> {
  const { key } = run;
  let decoded: { stored: StoredOutcome; json: string };
  try {
    decoded = decode(run.engine.codec, shared ? run.engine.openedOutcomes : undefined, key, record);
  } catch (error) {
    if (RecordIntegrityError.isInstance(error)) return run.fail('integrity-failed', error);
    throw error;
  }
  const { stored, json } = decoded;
  const outcome = run.waitedMs > 0 ? 'waited' : 'replayed';
  const resultBytes = run.observed ? utf8Length(json) : undefined;
  if (record.state === 'failed' || stored.e !== undefined) {
    const original = stored.e ?? { name: 'Error', message: 'unknown error' };
    run.fail(
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
  const hook = run.policy.onReplay;
  if (hook === undefined) {
    run.finish(outcome, undefined, resultBytes);
    return { value: stored.v as Result, replayed: true, key, outcome };
  }
  const { call } = run;
  const context: ReplayContext = {
    key,
    toolName: call.toolName,
    turnId: call.turnId,
    scope: call.scope,
    outcome,
    createdAt: record.createdAt,
    completedAt: record.completedAt,
    expiresAt: record.expiresAt,
  };
  return shaped(run, () => hook(stored.v as Result, context), outcome, resultBytes);
}

/** The value `onReplay` gives (or the error it throws) as the replay's result. */
async function shaped<Args, Result>(
  run: CallRun<Args, Result>,
  hook: () => Result | Promise<Result>,
  outcome: 'replayed' | 'waited',
  resultBytes: number | undefined,
): Promise<IdempotentResult<Result>> {
  let value: Result;
  try {
    value = await hook();
  } catch (error) {
    run.finish('failed', 'on_replay_error');
    throw error;
  }
  run.finish(outcome, undefined, resultBytes);
  return { value, replayed: true, key: run.key, outcome };
}
