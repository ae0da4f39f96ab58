/** One call of a LangGraph task: its thread, run and place in the run, read from LangGraph. */
import { canonicalize, type ExecutorOptions } from '@idempotent-tools/core';
import type * as kit from '@idempotent-tools/core/adapter-kit';
import {
  type BaseCheckpointSaver,
  getConfig,
  type LangGraphRunnableConfig,
} from '@langchain/langgraph';
import { configured } from './identity.js';

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
export function taskSpec(caller: string, name: string) {
  const spec = {
    caller,
    name,
    ...configured,
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
