/**
 * For adapters that wrap a framework's record of tool objects (AI SDK `ToolSet`, Mastra tools):
 * the record checked when it is wrapped, its adapter, and a one-tool wrapper's options as a set's.
 */
import { ConfigurationError } from '../errors/index.js';
import type { ExecutorOptions } from '../executor/executor-options.js';
import { refuseWrapped } from '../executor/wrapped.js';
import {
  type Adapter,
  type AdapterOptions,
  type AdapterSpec,
  checkToolName,
  createAdapter,
} from './adapter.js';
import type { RepeatablePolicy } from './repeats.js';

/** How an adapter of a tool record describes itself (see `AdapterSpec`). */
export interface ToolSetSpec<Info> extends Omit<AdapterSpec<Info>, 'toolNames' | 'otherToolNames'> {
  /** What to pass, completing "pass ...", e.g. "the tool set you pass to generateText: ...". */
  set: string;
  /** What a tool is, completing `"x" is not ...`, e.g. "a tool object: define it with tool()". */
  tool: string;
  /** Whether an object of the record is one of the framework's tools. @default every object */
  isTool?: (tool: object) => boolean;
}

/**
 * The entries of a tool record and their adapter: a tool with an `execute` is one the adapter
 * wraps; one without (provider-executed, run by the client) is among the set's other tools.
 *
 * @throws ConfigurationError for a value that is not a record of tools, an `execute` that is not
 *   a function (and see `createAdapter`)
 */
export function createToolSetAdapter<Info, Tool extends { execute?: unknown }>(
  tools: unknown,
  options: unknown,
  spec: ToolSetSpec<Info>,
): { adapter: Adapter<Info>; entries: [string, Tool][] } {
  const { set, tool: what, isTool = () => true, ...adapterSpec } = spec;
  const refuse = (option: string, message: string) =>
    new ConfigurationError({ option, message: `${spec.caller}: ${message}` });
  if (tools === null || typeof tools !== 'object' || Array.isArray(tools)) {
    throw refuse('tools', `pass ${set}.`);
  }
  const entries = Object.entries(tools) as [string, Tool][];
  for (const [name, tool] of entries) {
    if (tool === null || typeof tool !== 'object' || !isTool(tool)) {
      throw refuse('tools', `"${name}" is not ${what}.`);
    }
    if (tool.execute !== undefined && typeof tool.execute !== 'function') {
      throw refuse('execute', `tool "${name}" has an execute that is not a function.`);
    }
    refuseWrapped(name, tool, spec.caller);
  }
  const named = (runs: boolean) =>
    entries.filter(([, tool]) => (tool.execute !== undefined) === runs).map(([name]) => name);
  const adapter = createAdapter<Info>(options as never, {
    ...adapterSpec,
    toolNames: named(true),
    otherToolNames: named(false),
  });
  return { adapter, entries };
}

/**
 * A tool record wrapped: its adapter (`createToolSetAdapter`) given once to `wrapOf`, whose
 * wrapper makes each entry's tool (one it leaves as it is included).
 */
export function wrapToolSet<Info, Tool extends { execute?: unknown }>(
  tools: unknown,
  options: unknown,
  spec: ToolSetSpec<Info>,
  wrapOf: (adapter: Adapter<Info>) => (name: string, tool: Tool) => Tool,
): Record<string, Tool> {
  const { adapter, entries } = createToolSetAdapter<Info, Tool>(tools, options, spec);
  const wrap = wrapOf(adapter);
  return Object.fromEntries(entries.map(([name, tool]) => [name, wrap(name, tool)]));
}

/**
 * One tool wrapped as the only tool of a set named `name` (its options as the set's, see
 * `oneToolOptions`) by the set's wrapper `wrapSet`.
 * @throws ConfigurationError for a name providers reject (and what `wrapSet` throws)
 */
export function wrapOneTool<Tool>(
  name: unknown,
  tool: Tool,
  options: unknown,
  caller: string,
  wrapSet: (tools: Record<string, Tool>, options: unknown, caller: string) => object,
): Tool {
  checkToolName(name, caller);
  const set = wrapSet({ [name]: tool }, oneToolOptions(name, options), caller);
  return (set as Record<string, Tool>)[name] as Tool;
}

/** The options of a one-tool wrapper (`{ policy, unsafe }`) as those of a set of that tool. */
export function oneToolOptions(name: string, options: unknown): Record<string, unknown> {
  const { policy, unsafe, ...rest } = (options ?? {}) as { policy?: unknown; unsafe?: unknown };
  return {
    ...rest,
    ...(policy === undefined ? {} : { policies: { [name]: policy } }),
    ...(unsafe === true ? { unsafe: [name] } : {}),
  };
}

/** The options of a tool record's wrapper that name its tools (see `AdapterOptions`). */
export interface ToolSetOptions<Name extends string, Policies> {
  /** Per-tool policy (ttl, lease, businessKey, reconcile, onStale...), by name. @default {} */
  policies?: Policies;
  /** Tools left exactly as they are (read-only tools). @default [] */
  exclude?: ReadonlyArray<Name>;
  /** Tools not made idempotent: every call runs; the description says so. @default [] */
  unsafe?: ReadonlyArray<Name>;
}

/** The options of a one-tool wrapper (see `oneToolOptions`). */
export interface OneToolOptions<Policy> {
  /** The tool's policy. @default {} (the executor's defaults) */
  policy?: Policy;
  /** Leave the tool unguarded (every call runs), with the "not safe to retry" note. @default false */
  unsafe?: boolean;
}

/** How a tool wrapper's calls are identified and marked (see `AdapterOptions`). */
export type ToolWrapOptions<Info> = Pick<
  AdapterOptions<Info>,
  'turnId' | 'conversationId' | 'scope' | 'markFresh'
>;

/** All the options of a one-tool wrapper: the executor's, `ToolWrapOptions`, `{ policy, unsafe }`. */
export type OneToolWrapperOptions<Info, Policy> = ExecutorOptions &
  ToolWrapOptions<Info> &
  OneToolOptions<Policy & RepeatablePolicy>;

/**
 * All the options of a tool set's wrapper: the executor's, `ToolWrapOptions`, `ToolSetOptions`
 * whose policies (`Policies`: each tool's, by name) may say `repeatable`.
 */
export type ToolSetWrapperOptions<Info, Name extends string, Policies> = ExecutorOptions &
  ToolWrapOptions<Info> &
  ToolSetOptions<Name, { readonly [N in keyof Policies]?: Policies[N] & RepeatablePolicy }>;

/** How an adapter of a framework's list of tools describes itself (see `AdapterSpec`). */
export interface ToolListSpec<Info, Tool>
  extends Omit<AdapterSpec<Info>, 'toolNames' | 'otherToolNames'> {
  /** Completes "`caller`: ...", e.g. "params.tools must be the array you pass to ...". */
  list: string;
  /** Whether an entry is one of the tools the adapter wraps (the others are never wrapped). */
  isTool: (tool: object) => tool is Tool & { name: string };
}

/**
 * The adapter of a framework's list of tools (objects with a `name`): the entries for which
 * `isTool` holds are the ones it wraps, the other named ones among the set's other tools.
 *
 * @throws ConfigurationError for a value that is not an array (and see `createAdapter`)
 */
export function createToolListAdapter<Info, Tool>(
  tools: unknown,
  options: unknown,
  spec: ToolListSpec<Info, Tool>,
): Adapter<Info> {
  const { list, isTool, ...adapterSpec } = spec;
  if (!Array.isArray(tools)) {
    throw new ConfigurationError({ option: 'tools', message: `${spec.caller}: ${list}.` });
  }
  const entries = tools as object[];
  for (const tool of entries) {
    if (isTool(tool)) refuseWrapped(tool.name, tool, spec.caller);
  }
  return createAdapter<Info>(options as never, {
    ...adapterSpec,
    toolNames: entries.filter(isTool).map((tool) => tool.name),
    otherToolNames: entries.flatMap((tool) =>
      !isTool(tool) && 'name' in tool ? [String(tool.name)] : [],
    ),
  });
}

/**
 * A copy of a framework's tool object with some properties replaced: of the same class (its
 * prototype) with every own property (getters, symbols, non-enumerable ones) as it is, so that
 * the framework's checks and methods see the tool they made.
 */
export const copyTool = <T extends object>(tool: T, replaced: object): T =>
  Object.assign(
    Object.create(Object.getPrototypeOf(tool), Object.getOwnPropertyDescriptors(tool)),
    replaced,
  );
