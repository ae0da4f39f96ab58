/**
 * `@idempotent-tools/langchain/langgraph`: tasks of LangGraph's functional API whose side effect
 * runs once per thread, place in the run and arguments, across resumes after an interrupt,
 * whole-graph retries, subgraphs and a crashed process resumed from a persistent checkpointer
 * (LangGraph re-runs a task whose result it did not keep: each re-run is a lookup first); and
 * tasks that ask a person first (`approvalTask`: an interrupt, the resume value the decision).
 */
import type { ExecutorOptions } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import { interrupt, isGraphInterrupt, type TaskOptions, task } from '@langchain/langgraph';
import { type IdempotentTaskOptions, type TaskCall, taskSpec } from './langgraph-call.js';

export { type Approval, ApprovalRejectedError, createApprovals } from '@idempotent-tools/core';
export {
  type ApprovalDecision,
  type ApprovalRequest,
  isApprovalRequest,
} from '@idempotent-tools/core/adapter-kit';
export type { IdempotentTaskOptions, TaskCall } from './langgraph-call.js';

const nameOf = (nameOrOptions: string | TaskOptions) =>
  (typeof nameOrOptions === 'string' ? nameOrOptions : nameOrOptions?.name) as string;

/**
 * A LangGraph task (`task(name, fn)`) whose side effect runs once per thread
 * (`configurable.thread_id`), run (`configurable.turn_id`, else the thread is one run), place in
 * the run and arguments. A repeat returns the stored value (JSON round trip of the first).
 * Call `interrupt()` in `fn` only before its side effect: an interrupted call did not finish.
 *
 * ```ts
 * const charge = idempotentTask('charge', (order: Order) => bank.charge(order), { store });
 * ```
 * @throws ConfigurationError (when made) on bad options; (when called) with no thread id, or on a
 *   thread that already finished a run and no `turn_id`
 */
export function idempotentTask<Args extends unknown[], Result>(
  nameOrOptions: string | TaskOptions,
  fn: (...args: Args) => Result | Promise<Result>,
  options: IdempotentTaskOptions<Args, Result>,
): (...args: Args) => Promise<Result> {
  const { spec, info } = taskSpec('idempotentTask', nameOf(nameOrOptions));
  const { prepare, run } = kit.createTaskAdapter<TaskCall, Args>(fn, options, spec);
  const call = async (...args: Args) => run(await prepare(args, info(args)), fn);
  return task(nameOrOptions, call as never) as (...args: Args) => Promise<Result>;
}

/** Options of `approvalTask(name, fn, options)`: `idempotentTask`'s, and these. */
export type ApprovalTaskOptions<
  Args extends unknown[] = unknown[],
  Result = unknown,
  Rejected = never,
> = ExecutorOptions & kit.ApprovalTaskOptions<TaskCall, Args, Result, Rejected>;

/**
 * A LangGraph task whose call asks a person first, bound to the exact call: it pauses with
 * `interrupt(request)` (an `ApprovalRequest`), takes the resume value (an `ApprovalDecision`) as
 * the decision of that call (core's `askInRun`: write-once, a resume sent twice is one decision,
 * a resume that is not this call's asks again with `refused`), then runs `fn` once (as
 * `idempotentTask`). A rejection stays one (`ApprovalRejectedError`, or `onRejected`'s value); a
 * decision made on the store first (`createApprovals(idempotency).approve(key, { by })`) is
 * used without interrupting.
 *
 * ```ts
 * const refund = approvalTask('refund', (order: Order) => bank.refund(order), { store });
 * // ... paused: const [{ value }] = result.__interrupt__; (an ApprovalRequest)
 * await graph.invoke(new Command({ resume: { type: 'approve', approvalKey: value.approvalKey, by: 'alice' } }), config);
 * ```
 * @throws ConfigurationError (when made) on bad options; as `idempotentTask` when called
 */
export function approvalTask<Args extends unknown[], Result, Rejected = never>(
  nameOrOptions: string | TaskOptions,
  fn: (...args: Args) => Result | Promise<Result>,
  options: ApprovalTaskOptions<Args, Result, Rejected>,
): (...args: Args) => Promise<Result | Rejected> {
  const { spec, info } = taskSpec('approvalTask', nameOf(nameOrOptions));
  const { prepare, ask } = kit.createApprovalTask<TaskCall, Args, Result, Rejected>(fn, options, {
    ...spec,
    pause: (request) => interrupt(request, { responseSchema: kit.APPROVAL_DECISION_SCHEMA }),
    stops: isGraphInterrupt,
    resume: (decision) => `new Command({ resume: ${decision} })`,
  });
  const run = async (...args: Args) => ask(await prepare(args, info(args)));
  return task(nameOrOptions, run as never) as (...args: Args) => Promise<Result | Rejected>;
}
