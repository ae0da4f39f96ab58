/**
 * For adapters that wrap a server's registry of tools (MCP's `McpServer`): the server registers a
 * tool by name, keeps an entry whose handler field it calls, and lets the entry be updated later.
 * The wrapper goes on the tools registered already, on those registered later, and on an entry
 * again after each update.
 */
import { markWrapped, refuseWrapped } from '../executor/wrapped.js';
import type { Adapter } from './adapter.js';
import { presentTool, type ToolPresentation } from './presentation.js';

/** A registered tool entry, as far as the kit reads it (annotated with MCP-style hints). */
export interface ToolEntry {
  description?: string | undefined;
  annotations?: { readOnlyHint?: boolean; idempotentHint?: boolean } | undefined;
  update(updates: Record<string, unknown>): void;
  [field: string]: unknown;
}

/** An entry's own parts: as registered, and as updated since. */
export interface OwnTool<Tool extends ToolEntry> {
  name: string;
  /** The handler the server would call without the wrapper. */
  handler: unknown;
  description: string | undefined;
  annotations: Tool['annotations'];
  inputSchema: unknown;
}

/** How one entry is wrapped. */
export interface EntrySpec<Tool extends ToolEntry> {
  adapter: Adapter<never>;
  caller: string;
  /** The field of the entry the server calls. */
  field: string;
  /** The update field that changes the entry's input schema. */
  schemaUpdate: string;
  /** The entry's callbacks, each refused when another wrapper made it. */
  callbacks(tool: Tool): unknown[];
  /** The wrapped handler (made once; it reads `own` when called). */
  wrapped(own: OwnTool<Tool>): (...params: unknown[]) => unknown;
  /** Also wrap a tool annotated `readOnlyHint: true` (one that asks first always is). */
  wrapReadOnly: boolean;
  /** Whether the tool asks the person before it runs. */
  asks(name: string): boolean;
  /** The input schema the model sees of a wrapped tool (`present`: its presentation). */
  schema(present: ToolPresentation, own: unknown): unknown;
  /** Told when the entry's schema was set (a server's memo of it to forget). */
  changed?: ((name: string) => void) | undefined;
}

/**
 * Wrap one registered entry, now and after each `update(...)` (a new name, callback, schema...):
 * a wrapped tool gets its presented schema and description, the wrapper as its handler, and
 * `idempotentHint` where it is true (`false` for an unsafe tool, `true` for a business key: one
 * call across turns) unless it has its own; an unsafe one the "not safe to retry" note; an
 * excluded one, one without a handler, or a read-only one that asks nothing, stays as it is.
 */
export function wrapEntry<Tool extends ToolEntry>(
  name: string,
  tool: Tool,
  spec: EntrySpec<Tool>,
): void {
  const { field } = spec;
  const { description, annotations, inputSchema } = tool;
  const own: OwnTool<Tool> = { name, handler: tool[field], description, annotations, inputSchema };
  const wrapped = markWrapped(spec.wrapped(own));
  const apply = () => {
    for (const callback of spec.callbacks(tool)) {
      if (callback !== wrapped) refuseWrapped(own.name, callback, spec.caller);
    }
    const { adapter } = spec;
    const treatment = adapter.treatment(own.name);
    const readOnly = own.annotations?.readOnlyHint === true && !spec.wrapReadOnly;
    const kind =
      typeof own.handler !== 'function' || treatment === 'exclude'
        ? 'skip'
        : treatment === 'unsafe'
          ? 'unsafe'
          : readOnly && !spec.asks(own.name) // never run unapproved
            ? 'skip'
            : 'wrap';
    const present = presentTool(adapter, own.name, spec.caller);
    (tool as Record<string, unknown>).inputSchema =
      kind === 'wrap' ? spec.schema(present, own.inputSchema) : own.inputSchema;
    spec.changed?.(own.name);
    tool.description = kind === 'skip' ? own.description : present.describe(own.description);
    const keyed = kind === 'wrap' && adapter.policy(own.name)?.businessKey !== undefined;
    const hint = kind === 'unsafe' ? false : keyed ? true : undefined;
    const kept = hint === undefined || own.annotations?.idempotentHint !== undefined;
    tool.annotations = kept ? own.annotations : { ...own.annotations, idempotentHint: hint };
    (tool as Record<string, unknown>)[field] = kind === 'wrap' ? wrapped : own.handler;
  };
  const update = tool.update.bind(tool);
  tool.update = (updates) => {
    update(updates);
    if (typeof updates.name === 'string') own.name = updates.name;
    if (updates[spec.schemaUpdate] !== undefined) own.inputSchema = tool.inputSchema;
    if (tool[field] !== wrapped) own.handler = tool[field]; // a new callback
    if (updates.description !== undefined) own.description = updates.description as string;
    if (updates.annotations !== undefined) own.annotations = updates.annotations as never;
    apply();
  };
  apply();
}

type Method = (...args: unknown[]) => unknown;

/** A registering method of `server` (name first, returns the entry) that wraps what it registers. */
export function registering<Tool>(
  server: object,
  original: Method,
  wrap: (name: unknown, tool: Tool) => void,
): Method {
  return (...args) => {
    const registered = original.apply(server, args);
    wrap(args[0], registered as Tool);
    return registered;
  };
}

/** How a server's registry is wrapped. */
export interface RegistrySpec<Tool> {
  caller: string;
  /** The server's methods that register a tool (its name first) and return its entry. */
  methods: readonly string[];
  /** The tools registered already, by name. */
  registered: [string, Tool][];
  /** An entry's callbacks, each refused when another wrapper made it. */
  callbacks(tool: Tool): unknown[];
}

/**
 * Wrap every tool of a server, those registered already (refused before any is changed when
 * another wrapper made one) and those its registering methods register later. Returns the same
 * server, marked wrapped.
 */
export function wrapRegistry<S extends object, Tool>(
  server: S,
  spec: RegistrySpec<Tool>,
  wrap: (name: unknown, tool: Tool) => void,
): S {
  for (const [name, tool] of spec.registered) {
    for (const own of spec.callbacks(tool)) refuseWrapped(name, own, spec.caller);
  }
  for (const [name, tool] of spec.registered) wrap(name, tool);
  for (const method of spec.methods) {
    const original = (server as Record<string, unknown>)[method];
    if (typeof original !== 'function') continue;
    const value = registering(server, original as Method, wrap);
    Object.defineProperty(server, method, { configurable: true, writable: true, value });
  }
  return markWrapped(server);
}
