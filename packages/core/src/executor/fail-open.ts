/**
 * Fail-open (opt-in, `onStoreUnavailable: 'fail-open'`): the store failed on the first claim,
 * before anything ran here. The tool runs without a record; the call's one event says
 * `unguarded`.
 */
import { IdempotencyError } from '../errors/index.js';
import type { CallRun } from './call-run.js';
import { runInContext } from './context.js';
import type { ExecutionContext, IdempotentResult } from './types.js';

export async function runUnguarded<Args, Result>(
  run: CallRun<Args, Result>,
): Promise<IdempotentResult<Result>> {
  const { key, call } = run;
  const context: ExecutionContext = {
    key,
    toolName: call.toolName,
    turnId: call.turnId,
    scope: call.scope,
    signal: new AbortController().signal,
    stillOwned: () => true, // no record: nobody else can own it
  };
  let value: Result;
  try {
    value = await runInContext(context, run.around, () => run.fn(call.args, context));
  } catch (error) {
    run.finish('unguarded', IdempotencyError.isInstance(error) ? error.code : 'tool_error');
    throw error;
  }
  run.finish('unguarded');
  return { value, replayed: false, key, outcome: 'unguarded' };
}
