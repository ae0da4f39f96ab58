/**
 * Tasks of LangGraph's functional API whose side effect runs once per thread, place in the run
 * and arguments, across resumes after an interrupt, whole-graph retries, subgraphs and a crashed
 * process resumed from a persistent checkpointer (LangGraph re-runs a task whose result it did not
 * keep: each re-run is a lookup first); and tasks that ask a person first (`approvalTask`: an
 * interrupt, the resume value the decision).
 */
import { canonicalize, type ExecutorOptions } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import {
  type BaseCheckpointSaver,
  getConfig,
  interrupt,
  isGraphInterrupt,
  type LangGraphRunnableConfig,
  type TaskOptions,
  task,
} from '@langchain/langgraph';

/** What a `turnId`, `conversationId` or `scope` function is given about one task call. */
export interface TaskCall {
  taskName: string;
  /** The task's arguments. */
  args: readonly unknown[];
  /** The task's config: `configurable` (`thread_id`, `turn_id`, `checkpoint_ns`), `metadata`... */
  config: LangGraphRunnableConfig;
}

/**
 * Options of `idempotentTask(name, fn, options)`: the executor's options or `{ idempotency }`;
 * the run is `configurable.turn_id` (else the thread is one run), the thread `thread_id`.
 */
export type IdempotentTaskOptions<
  Args extends unknown[] = unknown[],
  Result = unknown,
> = ExecutorOptions & kit.TaskWrapOptions<TaskCall, Args, Result>;

type Tuple = NonNullable<Awaited<ReturnType<BaseCheckpointSaver['getTuple']>>>;

/**
 * Whether the thread finished a run before this one: `true`, `false`, or why its checkpoints
 * cannot tell (completing "... so ..."). An entrypoint writes `__end__` when it returns (a run
 * that broke or paused never did); a graph's new run (a new `__start__` version) marks the tasks
 * the run before left undone as seen: when its `versions_seen` equals the checkpoint before it,
 * that run finished. A state edited between two runs (`updateState`) cannot tell.
 */
async function finishedRun(config: LangGraphRunnableConfig): Promise<boolean | string> {
  const { __pregel_checkpointer: saver, thread_id, checkpoint_map } = config.configurable ?? {};
  const current = (checkpoint_map as Record<string, string> | undefined)?.[''];
  if (saver === undefined)
    return 'the graph has no checkpointer: LangGraph keeps no record of its runs';
  if (current === undefined) return 'LangGraph did not say which checkpoint the run is at';
  const s = saver as BaseCheckpointSaver;
  const at = { configurable: { thread_id, checkpoint_ns: '', checkpoint_id: current } };
  const tuple = await s.getTuple(at);
  let found = tuple; // else the latest checkpoint before this run's
  const thread = { configurable: { thread_id, checkpoint_ns: '' } };
  if (found === undefined) for await (found of s.list(thread, { before: at, limit: 1 }));
  if (found === undefined) return false; // no checkpoint before this run's: its first run
  const versions = found.checkpoint.channel_versions;
  if (versions.__end__ !== undefined) return true;
  if (Object.keys(versions).every((channel) => channel.startsWith('__'))) return false;
  if (tuple === undefined)
    return "this run's checkpoint is not written yet: durability 'exit', or a saver that writes while the run goes on (invoke with durability: 'sync')";
  const seen = (t: Tuple) => canonicalize(t.checkpoint.versions_seen);
  const start = (t: Tuple) => t.checkpoint.channel_versions.__start__;
  // From this run's input checkpoint back, one run at a time.
  for (let t: Tuple = tuple; ; ) {
    const before: Tuple | null | undefined =
      t.parentConfig && ((await s.getTuple(t.parentConfig)) ?? null);
    if (!before) return before === null ? 'a checkpoint of the thread is missing' : false;
    if (t.metadata?.source === 'input' && start(t) !== start(before)) {
      const edited = before.metadata?.source === 'update' || before.metadata?.source === 'fork';
      if (edited) return 'its state was edited (updateState) after the run before';
      if (seen(t) === seen(before)) return true;
    }
    t = before;
  }
}

/** A checkpoint namespace segment without its task id: `charge:<uuid>` -> `charge`. */
const TASK_ID = /:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * How one task is described to the kit: its turn is the run's (`turn_id`, else the thread is one
 * run: refused once it finished one) and the call's place in the run (the checkpoint namespace
 * without task ids, LangGraph's path of the call). `info(args)`: the call info, in the task.
 */
function taskSpec(caller: string, name: string) {
  const spec = {
    caller,
    name,
    turn: ({ config }: TaskCall) => kit.idOf(config.configurable?.turn_id),
    conversation: ({ config }: TaskCall) => kit.idOf(config.configurable?.thread_id),
    howTo:
      'the thread id (graph.invoke(input, { configurable: { thread_id } })) or the conversationId option',
    runs: {
      finished: ({ config }: TaskCall) => finishedRun(config),
      place: ({ config }: TaskCall) => [
        String(config.configurable?.checkpoint_ns ?? '')
          .split('|')
          .map((segment) => segment.replace(TASK_ID, '')),
        config.metadata?.langgraph_path === undefined
          ? null
          : (JSON.parse(JSON.stringify(config.metadata.langgraph_path)) as unknown),
      ],
      tag: ['lgt_', 'idempotent-tools/langgraph-task'] as const,
      runHowTo:
        'configurable: { thread_id, turn_id } with a turn_id of its own for each run (the same one when you retry the run), or the turnId option',
    },
  } satisfies kit.TaskSpec<TaskCall>;
  const info = (args: readonly unknown[]): TaskCall => ({
    taskName: name,
    args,
    config: getConfig() as LangGraphRunnableConfig,
  });
  return { spec, info };
}

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
