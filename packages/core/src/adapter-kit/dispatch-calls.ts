/**
 * The function calls of one model message, run for a hand-written loop (a dispatcher): an
 * unknown tool or arguments that are not JSON / do not match the schema become the model's error
 * text (nothing runs); every wrapped call is identified before any runs (a developer error is
 * thrown before anything ran); the calls run side by side, wrapped ones through the executor;
 * an error for the developer is thrown once every call settled; the tool's own errors come back
 * for the adapter to rethrow or turn into output, as its framework does.
 */
import { InvalidInputError } from '../errors/index.js';
import type { ExecutionContext } from '../executor.js';
import type { Adapter, AdapterOptions } from './adapter.js';
import { parseArguments, type StandardSchema, type ValidateFunction } from './arguments.js';
import { errorText, runCall, unwrappedContext } from './calls.js';
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
  /** Turns a wrapped call's identity error into the one to throw (default: as it is). */
  refuse?: (error: unknown) => unknown;
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
      ): Promise<{ output: unknown } | { call: Info; name: string; args: unknown }> => {
        const handler = options.handler(c.name);
        if (handler === undefined) {
          const message = `There is no tool named "${c.name}". Nothing ran. Call one of: ${options.names.join(', ')}.`;
          return { output: errorText(new InvalidInputError({ field: 'name', message })) };
        }
        const text =
          typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {});
        const parsed = await parseArguments(c.name, text, handler.schema);
        if ('error' in parsed) return { output: parsed.error };
        return { call: options.info(c.name, parsed.args, index), name: c.name, args: parsed.args };
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
      if (wrapped) throw options.refuse?.(error) ?? error;
      return undefined;
    }
  });
  if (turnId !== undefined) await options.beforeRun?.(turnId);
  const settled = await Promise.all(
    prepared.map(async (p, i) => {
      if (!('call' in p)) return p;
      const { call, name, args } = p;
      const handler = options.handler(name) as DispatchHandler<Info>;
      const execute = (args: unknown, ctx: ExecutionContext) => handler.execute(args, ctx, call);
      const id = identified[i];
      if (id?.wrapped) {
        const ran = await runCall(
          adapter as Adapter<never>,
          { toolName: name, turnId: id.turnId, scope: id.scope, args },
          execute,
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

/** The identity a dispatcher's caller may give per request (`run(calls, { turnId, ... })`). */
export interface RequestIdentity {
  turnId?: string | undefined;
  conversationId?: string | undefined;
  scope?: string | undefined;
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
