/**
 * The identity of one call of a LangGraph task (thread, run, place in the run, arguments), shared
 * by `idempotentTask` and `approvalTask`: the executor's `Call` of a task call, computed the same
 * way on every resume, retry and process.
 */
import {
  type Call,
  ConfigurationError,
  canonicalize,
  currentExecutionContext,
  type ExecutorOptions,
  sha256,
  type ToolPolicy,
} from '@idempotent-tools/core';
import { createAdapter, type PerCall } from '@idempotent-tools/core/adapter-kit';
import {
  type BaseCheckpointSaver,
  getConfig,
  type LangGraphRunnableConfig,
} from '@langchain/langgraph';

/** What a `turnId`, `conversationId` or `scope` function is given about one task call. */
export interface TaskCall {
  taskName: string;
  /** The task's arguments. */
  args: readonly unknown[];
  /** The task's config: `configurable` (`thread_id`, `turn_id`, `checkpoint_ns`), `metadata`... */
  config: LangGraphRunnableConfig;
}

/** Options of `idempotentTask(name, fn, options)`: the executor's options or `{ idempotency }`. */
export type IdempotentTaskOptions<
  Args extends unknown[] = unknown[],
  Result = unknown,
> = ExecutorOptions & {
  /**
   * The run: your id of this run of the entrypoint, the same when you retry it. Needed when
   * one thread serves several runs (a chat thread invoked once per user message).
   * @default undefined (`configurable.turn_id`, else the thread is one run)
   */
  turnId?: PerCall<TaskCall> | undefined;
  /**
   * The thread, when it is not `configurable.thread_id` (a string: every call is that thread).
   * @default undefined (`configurable.thread_id`)
   */
  conversationId?: PerCall<TaskCall> | undefined;
  /**
   * Tenant / user: records of one scope are never replayed in another.
   * @default undefined (one global scope)
   */
  scope?: PerCall<TaskCall> | undefined;
  /**
   * The operation's own identity in the arguments (an order id): the key is then scope + task
   * name + this value, whatever the thread, run or place (create-or-get); other arguments with
   * the same business key are drift (`DriftError`, unless `policy.onDrift: 'replay'`).
   * @default undefined (thread + run + place + all the arguments)
   */
  businessKey?: ((...args: Args) => unknown) | undefined;
  /**
   * `ttl`, `lease`, `reconcile`, `onStale`, `isTerminalError`... of this task.
   * @default {} (the executor's defaults)
   */
  policy?: Omit<ToolPolicy<Args, Result>, 'businessKey'> | undefined;
};

const idOf = (value: unknown) =>
  (typeof value === 'string' && value !== '') || typeof value === 'number'
    ? String(value)
    : undefined;

/** A checkpoint namespace segment without its task id: `charge:<uuid>` -> `charge`. */
const TASK_ID = /:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Where a call is in its run, stable across resumes and retries: the checkpoint namespace without
 * task ids (the graph, subgraphs and their counter, the task), LangGraph's path of the call (the
 * how-manieth call of the function that made it) and the key of the idempotent call it runs
 * inside, if any (which holds that call's own place).
 */
function placeOf(config: LangGraphRunnableConfig): unknown[] {
  const ns = String(config.configurable?.checkpoint_ns ?? '');
  const path = config.metadata?.langgraph_path;
  return [
    ns.split('|').map((segment) => segment.replace(TASK_ID, '')),
    path === undefined ? null : (JSON.parse(JSON.stringify(path)) as unknown),
    currentExecutionContext()?.key ?? null,
  ];
}

type Tuple = NonNullable<Awaited<ReturnType<BaseCheckpointSaver['getTuple']>>>;

/**
 * Whether the thread finished a run before this one: `true`, `false`, or why its checkpoints
 * cannot tell (a string, completing "... so ..."). Read from the root graph's checkpoints:
 * - an entrypoint writes what it returns to `__end__` when it returns, whatever it returned
 *   (`undefined` too), and the channel keeps a version from then on: a run that broke or paused
 *   never wrote it;
 * - a graph (`StateGraph`): a new run's input checkpoint (a new `__start__` version) marks the
 *   tasks the run before left undone as seen (LangGraph discards them): when its `versions_seen`
 *   is the same as the checkpoint before it, nothing was left: that run finished. A state edited
 *   or forked between two runs (`updateState`) cannot be told.
 */
async function finishedRun(config: LangGraphRunnableConfig): Promise<boolean | string> {
  const configurable = config.configurable ?? {};
  const saver = configurable.__pregel_checkpointer as BaseCheckpointSaver | undefined;
  const current = (configurable.checkpoint_map as Record<string, string> | undefined)?.[''];
  if (saver === undefined)
    return 'the graph has no checkpointer: LangGraph keeps no record of its runs';
  if (current === undefined) return 'LangGraph did not say which checkpoint the run is at';
  const root = { thread_id: configurable.thread_id, checkpoint_ns: '' };
  const at = (checkpoint_id: string) => ({ configurable: { ...root, checkpoint_id } });
  let tuple = await saver.getTuple(at(current));
  const found = tuple ?? (await latestBefore(saver, { configurable: root }, at(current)));
  if (found === undefined) return false; // no checkpoint before this run's: its first run
  const versions = found.checkpoint.channel_versions;
  if (versions.__end__ !== undefined) return true;
  if (Object.keys(versions).every((channel) => channel.startsWith('__'))) return false;
  if (tuple === undefined)
    return "this run's checkpoint is not written yet: durability 'exit', or a saver that writes while the run goes on (invoke with durability: 'sync')";
  const parentOf = async (t: Tuple) =>
    t.parentConfig === undefined ? undefined : ((await saver.getTuple(t.parentConfig)) ?? null);
  const startsRun = (t: Tuple, before: Tuple) =>
    t.metadata?.source === 'input' &&
    t.checkpoint.channel_versions.__start__ !== before.checkpoint.channel_versions.__start__;
  const seen = (t: Tuple) => canonicalize(t.checkpoint.versions_seen);
  // From this run's input checkpoint back, one run at a time.
  for (;;) {
    const before = await parentOf(tuple);
    if (before === undefined) return false; // the thread's first checkpoint
    if (before === null) return 'a checkpoint of the thread is missing';
    if (startsRun(tuple, before)) {
      const edited = before.metadata?.source === 'update' || before.metadata?.source === 'fork';
      if (edited) return 'its state was edited (updateState) after the run before';
      if (seen(tuple) === seen(before)) return true;
    }
    tuple = before;
  }
}

/** The thread's latest checkpoint before `config`'s. */
async function latestBefore(
  saver: BaseCheckpointSaver,
  thread: { configurable: Record<string, unknown> },
  config: { configurable: Record<string, unknown> },
): Promise<Tuple | undefined> {
  for await (const found of saver.list(thread, { before: config, limit: 1 })) return found;
  return undefined;
}

/**
 * The adapter of one task and the `Call` of each of its calls (to be called inside the task:
 * it reads LangGraph's config of the running task).
 * @throws ConfigurationError (when made) on bad options; (per call) with no thread id, or on a
 *   thread that already finished a run and no `turn_id`
 */
export function taskCalls<Args extends unknown[], Result>(
  caller: string,
  name: string,
  fn: unknown,
  options: IdempotentTaskOptions<Args, Result>,
  ownOptions: readonly string[] = [],
) {
  if (typeof fn !== 'function') {
    throw new ConfigurationError({
      option: 'fn',
      message: `${caller}(${JSON.stringify(name)}, fn, options): fn must be the task's function.`,
    });
  }
  const { policy, businessKey, ...rest } = (options ?? {}) as IdempotentTaskOptions<Args, Result>;
  if (businessKey !== undefined && typeof businessKey !== 'function') {
    throw new ConfigurationError({
      option: 'businessKey',
      message: `${caller}: businessKey must be a function of the task's arguments, e.g. (order) => order.id.`,
    });
  }
  const taskPolicy = {
    ...policy,
    ...(businessKey === undefined ? {} : { businessKey: (args: Args) => businessKey(...args) }),
  } as ToolPolicy<Args, Result>;
  const adapter = createAdapter<TaskCall>({ ...rest, policies: { [name]: taskPolicy } } as never, {
    caller,
    options: ['policy', 'businessKey', ...ownOptions],
    toolNames: [name],
    turn: ({ config }) => idOf(config.configurable?.turn_id),
    conversation: ({ config }) => idOf(config.configurable?.thread_id),
    // Without a turn id the thread is one run: its "turn" is derived from the thread alone.
    transcript: () => [{ role: 'user', content: 'run' }],
    howTo:
      'the thread id (graph.invoke(input, { configurable: { thread_id } })) or the conversationId option',
  });
  /** The executor's call of this task call, inside the running task. */
  const callOf = async (args: Args): Promise<Call<Args>> => {
    const config = getConfig() as LangGraphRunnableConfig;
    const info: TaskCall = { taskName: name, args, config };
    const { turn, scope } = adapter.identify(info, name);
    const thread = idOf(config.configurable?.thread_id) ?? null;
    const finished =
      turn?.source === 'derived' && businessKey === undefined ? await finishedRun(config) : false;
    if (finished !== false) {
      const named = thread === null ? 'the thread' : `thread ${JSON.stringify(thread)}`;
      const why =
        finished === true
          ? `${named} already finished a run`
          : `whether ${named} already finished a run cannot be told (${finished})`;
      throw new ConfigurationError({
        option: 'turnId',
        message: `${caller}(${name}): ${why}, so this call cannot be told from a retry of the same call in that run. Nothing ran. Pass configurable: { thread_id, turn_id } with a turn_id of its own for each run (the same one when you retry the run), or the turnId option.`,
      });
    }
    const turnId =
      turn === undefined
        ? undefined
        : `lgt_${sha256(canonicalize(['idempotent-tools/langgraph-task', 1, turn.turnId, thread, placeOf(config)]))}`;
    return { toolName: name, turnId, scope, args };
  };
  return { executor: adapter.executor, policy: taskPolicy, callOf };
}
