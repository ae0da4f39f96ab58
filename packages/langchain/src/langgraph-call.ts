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
  getPreviousState,
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

/**
 * Whether the thread already finished a run of its graph: the root graph's previous return value
 * (`getPreviousState()` at the root; inside a subgraph, read from the root checkpoint).
 */
async function finishedRun(config: LangGraphRunnableConfig): Promise<boolean> {
  const map = config.configurable?.checkpoint_map as Record<string, string> | undefined;
  const root = map?.[''];
  if (map === undefined || Object.values(map).every((id) => id === root)) {
    return getPreviousState() != null;
  }
  const saver = config.configurable?.__pregel_checkpointer as BaseCheckpointSaver | undefined;
  const configurable = { thread_id: config.configurable?.thread_id, checkpoint_ns: '' };
  const saved = await saver?.getTuple({ configurable: { ...configurable, checkpoint_id: root } });
  return saved?.checkpoint.channel_values.__previous__ != null;
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
    if (turn?.source === 'derived' && businessKey === undefined && (await finishedRun(config))) {
      throw new ConfigurationError({
        option: 'turnId',
        message: `${caller}(${name}): thread ${JSON.stringify(thread)} already finished a run (getPreviousState() holds its value), so this call cannot be told from a retry of the same call in that run. Nothing ran. Pass configurable: { thread_id, turn_id } with a turn_id of its own for each run (the same one when you retry the run), or the turnId option.`,
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
