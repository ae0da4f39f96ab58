/**
 * The function calls of one model message, run for a hand-written loop (a dispatcher): an
 * unknown tool or arguments that are not JSON / do not match the schema become the model's error
 * text (nothing runs); every wrapped call is identified before any runs (a developer error is
 * thrown before anything ran); the calls run side by side, wrapped ones through the executor;
 * an error for the developer is thrown once every call settled; the tool's own errors come back
 * for the adapter to rethrow or turn into output, as its framework does (`outputsOf`).
 * `createDispatcher` makes the rest of a dispatcher once: its handler types and checks, the
 * per-request identity (`requestIdentity`), the retry notes of its tool definitions.
 */

import { ConfigurationError, InvalidInputError } from '../errors/index.js';
import type { ExecutorOptions } from '../executor/executor-options.js';
import { refuseWrapped } from '../executor/wrapped.js';
import type { ExecutionContext, ToolPolicy } from '../executor.js';
import { withRetryNote } from '../model-output.js';
import { type Adapter, type AdapterOptions, type AdapterSpec, createAdapter } from './adapter.js';
import { parseArguments, type StandardSchema, type ValidateFunction } from './arguments.js';
import { errorText, unwrappedContext } from './calls.js';
import { runCall } from './pipeline.js';
import { presentTool } from './presentation.js';
import {
  keyArgs,
  type RepeatablePolicy,
  repeatClash,
  schemaHasProperty,
  withRepeatNote,
  withRepeatProperty,
} from './repeats.js';
import { checkPerCall } from './turn-identity.js';

/** What a dispatcher knows of one tool. */
export interface DispatchHandler<Info> {
  execute: (args: unknown, context: ExecutionContext, call: Info) => unknown;
  /** Checks the parsed arguments before anything runs; a Standard Schema's output becomes the args. */
  schema?: StandardSchema | ValidateFunction | undefined;
}

/** One function call of the model: its tool name and arguments (JSON text, or already parsed). */
export interface DispatchedCall {
  name: string;
  arguments: unknown;
}

/** The outcome of one call: its output (marked), or the tool's own error. */
export type DispatchOutcome<Info> = { output: unknown } | { error: unknown; call: Info };

export interface DispatchOptions<Info> {
  /** The names the model may call, for the unknown-tool message. */
  names: readonly string[];
  handler: (name: string) => DispatchHandler<Info> | undefined;
  /** The adapter's call info of a parsed call (`index`: its place in `calls`). */
  info: (toolName: string, args: unknown, index: number) => Info;
  /** How a wrapped call's output is marked (default `markOutput`, see `runCall`). */
  mark?: (value: unknown, replayed: boolean) => unknown;
  /** Called with the turn of the calls before any runs (e.g. to link the turn to the call ids). */
  beforeRun?: (turnId: string) => Promise<void>;
}

export async function dispatchCalls<Info>(
  adapter: Adapter<Info>,
  calls: readonly DispatchedCall[],
  options: DispatchOptions<Info>,
): Promise<DispatchOutcome<Info>[]> {
  const prepared = await Promise.all(
    calls.map(
      async (
        c,
        index,
      ): Promise<
        { output: unknown } | { call: Info; name: string; args: unknown; repeat: number }
      > => {
        const handler = options.handler(c.name);
        if (handler === undefined) {
          const message = `There is no tool named "${c.name}". Nothing ran. Call one of: ${options.names.join(', ')}.`;
          return { output: errorText(new InvalidInputError({ field: 'name', message })) };
        }
        const repeats = adapter.repeats(c.name);
        const parsed = await parseArguments(c.name, c.arguments, handler.schema, repeats);
        if ('error' in parsed) return { output: parsed.error };
        const { args, repeat = 1 } = parsed;
        return { call: options.info(c.name, args, index), name: c.name, args, repeat };
      },
    ),
  );
  let turnId: string | undefined;
  const identified = prepared.map((p) => {
    if (!('call' in p)) return undefined;
    const wrapped = adapter.treatment(p.name) === 'wrap';
    try {
      const id = adapter.identify(p.call, p.name);
      turnId ??= id.turnId;
      return { ...id, wrapped };
    } catch (error) {
      if (wrapped) throw error;
      return { turnId: undefined, scope: adapter.scopeOf(p.call), wrapped };
    }
  });
  if (turnId !== undefined) await options.beforeRun?.(turnId);
  const settled = await Promise.all(
    prepared.map(async (p, i) => {
      if (!('call' in p)) return p;
      const { call, name, args, repeat } = p;
      const handler = options.handler(name) as DispatchHandler<Info>;
      const execute = (args: unknown, ctx: ExecutionContext) => handler.execute(args, ctx, call);
      const id = identified[i];
      const repeats = adapter.repeats(name);
      if (id?.wrapped) {
        const ran = await runCall(
          adapter as Adapter<never>,
          {
            toolName: name,
            turnId: id.turnId,
            scope: id.scope,
            args: repeats === undefined ? args : keyArgs(args, repeat, repeats),
          },
          // The tool's own args (a repeat argument is not one of them).
          (_args, ctx) => execute(args, ctx),
          options.mark,
        );
        return 'error' in ran ? { ...ran, call } : ran;
      }
      try {
        return { output: await execute(args, unwrappedContext(name, turnId, id?.scope)) };
      } catch (error) {
        return { error, developer: false, call };
      }
    }),
  );
  const forDeveloper = settled.find((s) => 'developer' in s && s.developer);
  if (forDeveloper !== undefined && 'error' in forDeveloper) throw forDeveloper.error;
  return settled.map((s) => ('error' in s ? { error: s.error, call: s.call } : s));
}

/** The option of a dispatcher for the tool's own errors (see `outputsOf`). */
export interface ToolErrorOutputOption<Output = unknown> {
  /**
   * The tool's own errors: by default they are rethrown once every call settled; the claim is
   * released, so a retry runs again. Give a function to answer the model instead: its value is
   * the call's output. @default undefined (rethrow)
   */
  toolErrorOutput?: (error: unknown, call: { toolName: string; args: unknown }) => Output;
}

/**
 * The outputs of `dispatchCalls`, in order: a tool's own error is answered by `toolErrorOutput`,
 * or, without it, the first is thrown.
 */
export function outputsOf<Info extends { toolName: string; args: unknown }>(
  outcomes: readonly DispatchOutcome<Info>[],
  toolErrorOutput: ToolErrorOutputOption['toolErrorOutput'],
): unknown[] {
  return outcomes.map((outcome) => {
    if ('output' in outcome) return outcome.output;
    if (toolErrorOutput === undefined) throw outcome.error;
    const { toolName, args } = outcome.call;
    return toolErrorOutput(outcome.error, { toolName, args });
  });
}

/** Which turn the calls of one request (`run(calls, { turnId, ... })`) belong to, and for whom. */
export interface RequestIdentity {
  /** Your id of the user turn (e.g. of the user message). Wins over every other source. */
  turnId?: string | undefined;
  /** Your chat / thread id: with it the turn is derived from the conversation's user messages. */
  conversationId?: string | undefined;
  /** Overrides the dispatcher's scope for these calls. */
  scope?: string | undefined;
}

/** One call as the `turnId`, `conversationId` and `scope` functions of a dispatcher get it. */
export interface DispatchCall<Request extends RequestIdentity = RequestIdentity> {
  toolName: string;
  args: unknown;
  /** The request of the call: the second argument of the dispatcher's run (turn, messages...). */
  request: Readonly<Request>;
}

/** One tool of a dispatcher: a function, or `{ execute, schema }`. */
export type ToolHandler<Args = never, Result = unknown> =
  | ((args: Args, context: ExecutionContext) => Result | Promise<Result>)
  | {
      execute: (args: Args, context: ExecutionContext) => Result | Promise<Result>;
      /** Checks the parsed arguments before anything runs; a Standard Schema's output becomes the args. */
      schema?: StandardSchema<Args> | ValidateFunction;
    };

/** A dispatcher's handlers, checked, and its adapter (see `createDispatcher`). */
export interface Dispatcher<Info extends DispatchCall> {
  readonly adapter: Adapter<Info>;
  /** The tool names (the handlers' keys). */
  readonly names: readonly string[];
  /** The handler of a tool, for `dispatchCalls` (undefined: no such tool). */
  handler(name: string): DispatchHandler<Info> | undefined;
  /**
   * A copy of a tool definition with the retry note appended to its description (`withRetryNote`:
   * safe to retry, or not); the tool itself when it is left as it is (excluded, or not one of the
   * handlers).
   */
  describe<T extends { name?: string | undefined; description?: string | null | undefined }>(
    tool: T,
  ): T;
  /**
   * The JSON schema of a tool's parameters as the model should see it: with the repeat argument
   * for a repeatable tool (its policy's `repeatable`), else the schema itself. `strict`: the
   * provider's strict mode (every property required), the argument is then required and nullable.
   * @throws ConfigurationError when the schema has a property of the repeat argument's name
   */
  parameters<S>(name: string | undefined, schema: S, strict?: boolean): S;
  /** `dispatchCalls` with this dispatcher's adapter, names and handlers. */
  run(
    calls: readonly DispatchedCall[],
    options: Omit<DispatchOptions<Info>, 'names' | 'handler'> &
      Partial<Pick<DispatchOptions<Info>, 'handler'>>,
  ): Promise<DispatchOutcome<Info>[]>;
  /**
   * Checks the turn of a request before anything is sent, for a tool the framework calls later
   * with the calls only: unless `turnId` or `conversationId` is a function of the call, the turn
   * of a wrapped tool that needs one is resolved now.
   * @throws ConfigurationError when the request's turn cannot be identified
   */
  checkTurn(request: Info['request']): void;
}

/**
 * The parts of a dispatcher: its handlers (each a function or `{ execute, schema? }`, checked
 * here) and its adapter, whose `turnId`, `conversationId` and `scope` a request may give
 * (`requestIdentity`). Everything is checked when the dispatcher is made.
 *
 * @throws ConfigurationError for a bad handler (and see `createAdapter`)
 */
export function createDispatcher<Info extends DispatchCall>(
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Readonly<Record<string, ToolHandler<any, unknown> | DispatchHandler<Info>>>,
  options: (AdapterOptions<Info, unknown> & ExecutorOptions) | undefined,
  spec: Omit<AdapterSpec<Info>, 'toolNames'>,
): Dispatcher<Info> {
  const own = handlers ?? {};
  const names = Object.keys(own);
  const handler = (name: string): DispatchHandler<Info> | undefined => {
    if (!Object.hasOwn(own, name)) return undefined;
    const h = own[name];
    return typeof h === 'function' ? { execute: h as DispatchHandler<Info>['execute'] } : h;
  };
  for (const name of names) {
    if (typeof handler(name)?.execute !== 'function') {
      throw new ConfigurationError({
        option: 'handlers',
        message: `${spec.caller}: the handler of tool "${name}" must be a function or { execute, schema? }.`,
      });
    }
    // A handler made idempotent already (`idempotency.wrap`): its call would wait for itself.
    refuseWrapped(name, own[name], spec.caller);
  }
  const missing = options === null || typeof options !== 'object'; // createAdapter says what to pass
  const adapter = createAdapter<Info>(
    missing ? options : { ...options, ...requestIdentity<Info>(options, spec.caller) },
    { repeatable: true, ...spec, toolNames: names },
  );
  for (const name of names) {
    const repeats = adapter.repeats(name);
    if (repeats !== undefined && schemaHasProperty(handler(name)?.schema, repeats.argument)) {
      throw repeatClash(name, repeats, spec.caller);
    }
  }
  const perCall = [options?.turnId, options?.conversationId].some((v) => typeof v === 'function');
  const needy = names.find(
    (n) => adapter.treatment(n) === 'wrap' && adapter.policy(n)?.businessKey === undefined,
  );
  return {
    adapter,
    names,
    handler,
    describe(tool) {
      const treatment = adapter.treatment(tool.name ?? '');
      if (!names.includes(tool.name ?? '') || treatment === 'exclude') return tool;
      const repeats = adapter.repeats(tool.name ?? '');
      return {
        ...tool,
        description:
          repeats === undefined
            ? withRetryNote(tool.description ?? undefined, treatment === 'wrap')
            : withRepeatNote(tool.description ?? undefined, repeats),
      };
    },
    parameters(name, schema, strict) {
      const repeats = names.includes(name ?? '') ? adapter.repeats(name ?? '') : undefined;
      if (repeats === undefined) return schema;
      return withRepeatProperty(schema, name ?? '', repeats, spec.caller, strict) as typeof schema;
    },
    run: (calls, more) => dispatchCalls(adapter, calls, { names, handler, ...more }),
    checkTurn(request) {
      if (perCall || needy === undefined) return;
      try {
        adapter.identify({ toolName: needy, args: {}, request } as Info, needy);
      } catch (error) {
        if (ConfigurationError.isInstance(error)) throw error; // else: a scope function's, later
      }
    },
  };
}

/**
 * The `turnId`, `conversationId` and `scope` options of a dispatcher whose calls carry the
 * request they came with: the request's own value wins over the option's (a string, or a
 * function of the call). The options are checked here, when the tools are wrapped.
 */
export function requestIdentity<Info extends { request: Readonly<RequestIdentity> }>(
  options: Pick<AdapterOptions<Info>, 'turnId' | 'conversationId' | 'scope'>,
  caller: string,
): Required<Pick<AdapterOptions<Info>, 'turnId' | 'conversationId' | 'scope'>> {
  const pick = (field: 'turnId' | 'conversationId' | 'scope') => {
    checkPerCall(field, options[field], caller);
    const value = options[field];
    return (call: Info) =>
      call.request[field] ?? (typeof value === 'function' ? value(call) : value);
  };
  return { turnId: pick('turnId'), conversationId: pick('conversationId'), scope: pick('scope') };
}

/**
 * The options of a dispatcher whose tools may take deliberate repeats (`createDispatcher`): the
 * kit's, with a policy per tool that may say `repeatable`; `Output` is what the tools return.
 */
export type DispatcherOptions<Info = DispatchCall, Output = unknown> = AdapterOptions<
  Info,
  ToolPolicy<never, Output> & RepeatablePolicy
>;

/** How `presentDefinition` presents a tool definition. */
export interface DefinitionOptions {
  /** The adapter's public function, for the messages. */
  caller: string;
  /** The field of the definition that holds its parameters' schema. @default none: the description only */
  field?: string | undefined;
  /** A provider's strict mode (see `ToolPresentation.jsonSchema`). @default false */
  strict?: boolean | undefined;
  /** The field holds an OpenAPI-style schema (`ToolPresentation.openApiSchema`). @default false: JSON Schema */
  openApi?: boolean | undefined;
}

/**
 * A copy of one of a dispatcher's tool definitions as the model sees it (`presentTool`): the note
 * in its description and, for a repeatable tool, the repeat argument in the schema of its `field`
 * (a schema of the argument alone when the field is empty). The definition itself when the
 * dispatcher leaves it as it is (excluded, or not one of its tools).
 * @throws ConfigurationError when a repeatable tool's schema has its own property of that name
 */
export function presentDefinition<
  Info extends DispatchCall,
  T extends { name?: string | undefined; description?: string | null | undefined },
>(dispatcher: Pick<Dispatcher<Info>, 'adapter' | 'names'>, tool: T, options: DefinitionOptions): T {
  const name = tool.name ?? '';
  if (!dispatcher.names.includes(name)) return tool;
  const presented = presentTool(dispatcher.adapter as Adapter<never>, name, options.caller);
  if (presented.treatment === 'exclude') return tool;
  const description = presented.describe(tool.description ?? undefined);
  const { field, strict = false } = options;
  if (field === undefined || presented.repeats === undefined) return { ...tool, description };
  const own = (tool as Record<string, unknown>)[field];
  const schema = options.openApi ? presented.openApiSchema(own) : presented.jsonSchema(own, strict);
  return { ...tool, description, [field]: schema };
}
