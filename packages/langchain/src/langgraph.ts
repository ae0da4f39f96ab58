/**
 * `@idempotent-tools/langchain/langgraph`: tasks of LangGraph's functional API whose side effect
 * runs once per thread, place in the run and arguments, across resumes after an interrupt,
 * whole-graph retries, subgraphs and a crashed process resumed from a persistent checkpointer.
 *
 * LangGraph keeps a finished task's result in the checkpoint and re-runs a task whose result it
 * did not keep: the process died after the effect, before the checkpoint was written; the run was
 * invoked again with its input (a new checkpoint, new task ids); the task itself was interrupted.
 * `idempotentTask` makes each of those a lookup first.
 */
import { type TaskOptions, task } from '@langchain/langgraph';
import { type IdempotentTaskOptions, taskCalls } from './langgraph-call.js';

export {
  type ApprovalDecision,
  type ApprovalRequest,
  type ApprovalTaskOptions,
  approvalTask,
  isApprovalRequest,
} from './langgraph-approval.js';
export type { IdempotentTaskOptions, TaskCall } from './langgraph-call.js';

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
  const name = typeof nameOrOptions === 'string' ? nameOrOptions : nameOrOptions?.name;
  const { executor, policy, callOf } = taskCalls('idempotentTask', name as string, fn, options);
  const run = async (...args: Args): Promise<Result> => {
    const call = await callOf(args);
    return (await executor.run(call, (a: Args) => fn(...a), policy)).value;
  };
  return task(nameOrOptions, run as never) as (...args: Args) => Promise<Result>;
}
