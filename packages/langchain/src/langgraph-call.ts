/** One call of a LangGraph task: its thread, run and place in the run, read from LangGraph. */
import {
  ConfigurationError,
  canonicalize,
  currentExecutionContext,
  type ExecutorOptions,
  sha256,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import {
  type BaseCheckpointSaver,
  getConfig,
  type LangGraphRunnableConfig,
} from '@langchain/langgraph';
import { idOf } from './identity.js';

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
 * The adapter of one task and `prepare(args)`, the prepared call of one of its calls (inside the
 * running task). Its turn id: the run's turn (`turn_id`, else the thread is one run: refused once
 * it finished one) and the call's place in the run (the checkpoint namespace without task ids,
 * LangGraph's path of the call, the key of the idempotent call it runs inside).
 */
export function taskCalls<Args extends unknown[], Result>(
  caller: string,
  name: string,
  fn: unknown,
  options: IdempotentTaskOptions<Args, Result>,
  own: readonly string[] = [],
) {
  const keyed = options?.businessKey !== undefined;
  const tasks = kit.createTaskAdapter<TaskCall, Args>(fn, options, {
    caller,
    name,
    options: own,
    turn: ({ config }) => idOf(config.configurable?.turn_id),
    conversation: ({ config }) => idOf(config.configurable?.thread_id),
    // Without a turn id the thread is one run: its "turn" is derived from the thread alone.
    transcript: () => [{ role: 'user', content: 'run' }],
    howTo:
      'the thread id (graph.invoke(input, { configurable: { thread_id } })) or the conversationId option',
    turnOf: async (turn, { config }) => {
      if (turn === undefined) return undefined;
      const thread = idOf(config.configurable?.thread_id) ?? null;
      const finished = turn.source === 'derived' && !keyed && (await finishedRun(config));
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
      const ns = String(config.configurable?.checkpoint_ns ?? '').split('|');
      const path = config.metadata?.langgraph_path;
      const place = [
        ns.map((segment) => segment.replace(TASK_ID, '')),
        path === undefined ? null : (JSON.parse(JSON.stringify(path)) as unknown),
        currentExecutionContext()?.key ?? null,
      ];
      return `lgt_${sha256(canonicalize(['idempotent-tools/langgraph-task', 1, turn.turnId, thread, place]))}`;
    },
  });
  const config = () => getConfig() as LangGraphRunnableConfig;
  const prepare = (args: Args) => tasks.prepare(args, { taskName: name, args, config: config() });
  return { ...tasks, prepare };
}
