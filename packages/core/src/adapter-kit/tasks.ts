/**
 * For adapters of a workflow engine's tasks (a LangGraph task): a function of the app, not a
 * model's tool, called with its arguments (an array), identified by its run and its place in the
 * run. The options are checked when the task is made; each call is prepared by the pipeline
 * (`prepareCall`, the arguments as they are) and every error is thrown (`orThrow`).
 */
import { ConfigurationError } from '../errors/index.js';
import { currentExecutionContext } from '../executor/context.js';
import type { ToolPolicy } from '../executor.js';
import { canonicalize, sha256 } from '../keys/canonicalize.js';
import { type Adapter, type AdapterSpec, createAdapter } from './adapter.js';
import { type CallInput, orThrow, type PreparedCall, prepareCall, settleRun } from './pipeline.js';
import type { PerCall, ResolvedTurn } from './turn-identity.js';

/** The options of a task wrapper (`idempotentTask(name, fn, options)`), with the executor's. */
export interface TaskWrapOptions<Info, Args extends unknown[] = unknown[], Result = unknown> {
  /**
   * The run: your id of this run of the workflow, the same when you retry it. Needed when one
   * thread serves several runs (a chat thread invoked once per user message).
   * @default undefined (the engine's run id, else the thread is one run)
   */
  turnId?: PerCall<Info> | undefined;
  /**
   * The thread, when it is not the engine's (a string: every call is that thread).
   * @default undefined (the engine's thread id)
   */
  conversationId?: PerCall<Info> | undefined;
  /**
   * Tenant / user: records of one scope are never replayed in another.
   * @default undefined (one global scope)
   */
  scope?: PerCall<Info> | undefined;
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
}

/** How a task adapter describes itself: its turn sources, its own options, the turn id's place. */
export interface TaskSpec<Info>
  extends Omit<AdapterSpec<Info>, 'toolNames' | 'otherToolNames' | 'repeatable'> {
  /** The task's name (its "tool name" in keys and records). */
  name: string;
  /** The turn id the key is made of (see `CallInput.turnOf`: the call's place in the run). */
  turnOf?: CallInput<Info>['turnOf'];
  /**
   * The engine's runs of a thread (`TaskRuns`): the turn id is then the run's and the call's
   * place in it (`turnOf` is not used). @default undefined
   */
  runs?: TaskRuns<Info> | undefined;
}

/**
 * How a workflow engine's thread keeps its runs, for a task whose turn id is its run's (the turn
 * source's run id, else the thread is one run: its turn derived from the thread alone) and its
 * place in the run. Without a run id, a thread that already finished a run is refused (a second
 * run could not be told from a retry of the first), as is one whose history cannot tell.
 */
export interface TaskRuns<Info> {
  /** Whether the thread finished a run before this call's: true, false, or why it cannot tell. */
  finished(info: Info): boolean | string | Promise<boolean | string>;
  /**
   * The call's place in its run, as the engine says it (its path, its namespace without ids): the
   * key of the idempotent call it runs inside, if any, is added to it.
   */
  place(info: Info): unknown[];
  /** The turn id's prefix and domain tag, e.g. `['lgt_', 'my-lib/task']` (stable: keys hold them). */
  tag: readonly [prefix: string, domain: string];
  /** How to give each run an id of its own, completing "Pass ..." in the refusal. */
  runHowTo: string;
}

/** The turn id of a task call of a thread's run (see `TaskRuns`). */
function runTurnOf<Info>(spec: TaskSpec<Info>, runs: TaskRuns<Info>, keyed: boolean) {
  return async (turn: ResolvedTurn | undefined, info: Info): Promise<string | undefined> => {
    if (turn === undefined) return undefined;
    const thread = spec.conversation?.(info) ?? null;
    const finished = turn.source === 'derived' && !keyed && (await runs.finished(info));
    if (finished !== false) {
      const named = thread === null ? 'the thread' : `thread ${JSON.stringify(thread)}`;
      const why =
        finished === true
          ? `${named} already finished a run`
          : `whether ${named} already finished a run cannot be told (${finished})`;
      throw new ConfigurationError({
        option: 'turnId',
        message: `${spec.caller}(${spec.name}): ${why}, so this call cannot be told from a retry of the same call in that run. Nothing ran. Pass ${runs.runHowTo}.`,
      });
    }
    const place = [...runs.place(info), currentExecutionContext()?.key ?? null];
    const [prefix, domain] = runs.tag;
    return `${prefix}${sha256(canonicalize([domain, 1, turn.turnId, thread, place]))}`;
  };
}

/** A task's adapter (see `createTaskAdapter`). */
export interface TaskAdapter<Info, Args extends unknown[]> {
  readonly adapter: Adapter<Info>;
  /** The prepared call of one call (`info`: what `turnId`, `conversationId`, `scope` get). */
  prepare(args: Args, info: Info): Promise<PreparedCall<Info>>;
  /** Run a prepared call: its value (stored, no replay mark), every error thrown. */
  run<Result>(
    prepared: PreparedCall<Info>,
    fn: (...args: Args) => Result,
  ): Promise<Awaited<Result>>;
}

/**
 * The adapter of one task: its calls prepared (`prepare`) and run (`run`).
 * @throws ConfigurationError for a `fn` or `businessKey` that is not a function (and see
 *   `createAdapter`); `prepare` throws what `prepareCall` refuses
 */
export function createTaskAdapter<Info, Args extends unknown[]>(
  fn: unknown,
  options: unknown,
  spec: TaskSpec<Info>,
): TaskAdapter<Info, Args> {
  const { name, runs, turnOf: own, ...adapterSpec } = spec;
  const { caller } = spec;
  if (typeof fn !== 'function') {
    throw new ConfigurationError({
      option: 'fn',
      message: `${caller}(${JSON.stringify(name)}, fn, options): fn must be the task's function.`,
    });
  }
  const { policy, businessKey, ...rest } = (options ?? {}) as TaskWrapOptions<Info, Args>;
  if (businessKey !== undefined && typeof businessKey !== 'function') {
    throw new ConfigurationError({
      option: 'businessKey',
      message: `${caller}: businessKey must be a function of the task's arguments, e.g. (order) => order.id.`,
    });
  }
  const keyed = businessKey === undefined ? {} : { businessKey: (a: Args) => businessKey(...a) };
  const turnOf = runs === undefined ? own : runTurnOf(spec, runs, businessKey !== undefined);
  const adapter = createAdapter<Info>(
    { ...rest, policies: { [name]: { ...policy, ...keyed } } } as never,
    {
      // Without a run id the thread is one run: its "turn" is derived from the thread alone.
      ...(runs === undefined ? {} : { transcript: () => [{ role: 'user', content: 'run' }] }),
      ...adapterSpec,
      options: ['policy', 'businessKey', ...(spec.options ?? [])],
      toolNames: [name],
    },
  );
  return {
    adapter,
    prepare: async (args, info) =>
      orThrow(
        await prepareCall(adapter, {
          toolName: name,
          input: args,
          parsed: true,
          info: () => info,
          turnOf,
        }),
      ),
    run: async ({ call, policy, args }, fn) => {
      const execute = () => fn(...(args as Args));
      const run = () => adapter.executor.run(call, execute, policy as never);
      return orThrow(await settleRun(adapter as Adapter<never>, run, (value) => value)) as never;
    },
  };
}
