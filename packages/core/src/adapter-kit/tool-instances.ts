/**
 * For adapters of frameworks whose tools are instances of the framework's classes, checked by
 * class and method (LangChain's `StructuredTool`): the array of tools checked when it is
 * wrapped, and each wrapped tool made as an object of the same class (the original its
 * prototype) with the kit's presentation as own properties. The adapter replaces only the method
 * the framework runs a call with.
 */
import { ConfigurationError } from '../errors/index.js';
import { markWrapped, refuseWrapped } from '../executor/wrapped.js';
import { type Adapter, type AdapterSpec, checkToolName, createAdapter } from './adapter.js';
import { presentTool, type ToolPresentation } from './presentation.js';

/** How an adapter of tool instances describes itself (see `AdapterSpec`). */
export interface ToolInstanceSpec<Info>
  extends Omit<AdapterSpec<Info>, 'toolNames' | 'otherToolNames'> {
  /** What the wrapper takes, completing "`caller` takes ...; got null", e.g. "LangChain tools". */
  takes: string;
  /** The method a tool runs its calls with (LangChain's `_call`): an object without it is refused. */
  method: string;
}

/**
 * @throws ConfigurationError unless `tool` is an object with the spec's `method` (a function)
 */
export function checkToolInstance(
  tool: unknown,
  spec: Pick<ToolInstanceSpec<never>, 'caller' | 'takes' | 'method'>,
): void {
  const t = tool as Record<string, unknown> | null;
  if (t !== null && typeof t === 'object' && typeof t[spec.method] === 'function') return;
  throw new ConfigurationError({
    option: 'tools',
    message: `${spec.caller} takes ${spec.takes}; got ${t === null ? 'null' : typeof t}.`,
  });
}

/**
 * The adapter of an array of tool instances, each checked (`checkToolInstance`) before the
 * options (see `createAdapter`); every tool named by its `name`.
 * @throws ConfigurationError for a value that is not an array, an entry that is no tool
 */
export function createInstanceAdapter<Info>(
  tools: unknown,
  options: unknown,
  spec: ToolInstanceSpec<Info>,
): Adapter<Info> {
  const { takes, method, ...adapterSpec } = spec;
  if (!Array.isArray(tools)) {
    throw new ConfigurationError({
      option: 'tools',
      message: `${spec.caller} takes an array of tools.`,
    });
  }
  for (const tool of tools) checkToolInstance(tool, spec);
  return createAdapter<Info>(options as never, {
    ...adapterSpec,
    toolNames: tools.map((tool: { name?: unknown }) => tool.name as string),
  });
}

/**
 * A tool's schema with the repeat argument: a zod object (zod 3.25+ or 4, extended with the zod
 * `load` loads, see `ToolPresentation.zodSchema`), else a JSON schema. As it is when the tool is
 * not repeatable.
 */
export function presentSchema<S>(
  shown: ToolPresentation,
  schema: S,
  load: (specifier: string) => unknown,
): S {
  const s = schema as { _zod?: unknown; _def?: unknown } | null | undefined;
  const zod = s?._zod !== undefined || s?._def !== undefined;
  return zod ? shown.zodSchema(schema, load) : shown.jsonSchema(schema);
}

/** How `wrapToolInstance` makes the wrapped tool. */
export interface ToolInstanceOptions {
  caller: string;
  /** The method the framework runs a call with (LangChain's `_call`): the wrapper's replaces it. */
  method: string;
  /** How a repeatable tool's zod is loaded (the adapter's `requireNear`, see `presentSchema`). */
  load: (specifier: string) => unknown;
  /** The property that holds the tool's schema. @default 'schema' */
  schema?: string;
  /** Other own properties of a wrapped (not an unsafe) tool's copy. @default {} */
  fields?: Readonly<Record<string, unknown>>;
}

/**
 * A tool instance wrapped: an excluded tool as it is; else an object of the tool's class (the
 * tool its prototype, so the framework's class checks and methods see the tool it made), marked
 * wrapped, with the presentation's description (see `presentTool`) as its own. An unsafe tool's
 * copy has only that; a wrapped one's also the schema with the repeat argument (a repeatable
 * tool, `presentSchema`), the `fields`, and `call` (marked) as its `method`.
 * @throws ConfigurationError for a tool that is already idempotent (its call would wait for
 *   itself), a repeatable tool's schema that cannot take the repeat argument
 */
export function wrapToolInstance<T extends { name: string; description?: string }>(
  tool: T,
  adapter: Adapter<never>,
  options: ToolInstanceOptions,
  call: (...args: never[]) => unknown,
): T {
  const { caller, load, schema = 'schema', fields = {} } = options;
  const shown = presentTool(adapter, tool.name, caller);
  if (shown.treatment === 'exclude') return tool;
  refuseWrapped(tool.name, tool, caller);
  const copy = markWrapped(Object.create(tool) as T);
  const field = { writable: true, enumerable: true, configurable: true };
  const own = (name: string, value: unknown) =>
    void Object.defineProperty(copy, name, { ...field, value });
  own('description', shown.describe(tool.description));
  if (shown.treatment === 'unsafe') return copy;
  if (shown.repeats !== undefined) {
    own(schema, presentSchema(shown, (tool as Record<string, unknown>)[schema], load));
  }
  for (const [name, value] of Object.entries(fields)) own(name, value);
  own(options.method, markWrapped(call));
  return copy;
}

/**
 * For a wrapper of the tools it meets at run time (a middleware's): `wrap` each tool once, its
 * name checked first (`checkToolName`), the copy kept while the tool lives (weakly held).
 */
export function wrapEachOnce<T extends { name: string }>(
  caller: string,
  wrap: (tool: T) => T,
): (tool: T) => T {
  const copies = new WeakMap<T, T>();
  return (tool) => {
    let copy = copies.get(tool);
    if (copy === undefined) {
      checkToolName(tool.name, caller);
      copy = wrap(tool);
      copies.set(tool, copy);
    }
    return copy;
  };
}

/**
 * A plain object of a tool's `fields` that are defined (getters and the prototype's read too):
 * the definition the model is shown of a wrapped tool, for a framework that rejects a tool
 * instance it did not make in what it shows the model.
 */
export function plainDefinition<T extends object>(tool: T, fields: readonly string[]): T {
  const own = tool as Record<string, unknown>;
  const shown = fields.filter((field) => own[field] !== undefined);
  return Object.fromEntries(shown.map((field) => [field, own[field]])) as T;
}
