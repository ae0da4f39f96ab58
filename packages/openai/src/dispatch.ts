/**
 * Dispatch helpers for the OpenAI APIs: run the function calls of a Chat Completions message or
 * of a Responses output idempotently and return the ready-to-send tool messages / outputs.
 */
import {
  type ExecutionContext,
  type Idempotency,
  InvalidInputError,
  turnIdFromMessages,
  withRetryNote,
} from '@idempotent-tools/core';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions';
import type {
  ResponseInput,
  ResponseInputItem,
  ResponseOutputItem,
} from 'openai/resources/responses/responses';
import {
  type CommonOptions,
  checkNames,
  modelErrorText,
  runCall,
  unwrappedContext,
} from './shared.js';

/** A Standard Schema (zod >= 3.24, valibot, arktype...): https://standardschema.dev */
export interface StandardSchema<Output = unknown> {
  readonly '~standard': {
    validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
  };
}
type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | {
      readonly issues: ReadonlyArray<{
        readonly message: string;
        readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
      }>;
    };

/** A JSON-schema validator in the ajv style: true when valid, else false with `errors`. */
export type ValidateFunction = ((value: unknown) => boolean) & {
  errors?: ReadonlyArray<{ instancePath?: string; message?: string }> | null;
};

/** One tool: a function, or `{ execute, schema }`. */
export type ToolHandler<Args = never, Result = unknown> =
  | ((args: Args, context: ExecutionContext) => Result | Promise<Result>)
  | {
      execute: (args: Args, context: ExecutionContext) => Result | Promise<Result>;
      /** Checks the parsed arguments before anything runs; a Standard Schema's output becomes the args. */
      schema?: StandardSchema<Args> | ValidateFunction;
    };

export interface ToolDispatcherOptions
  extends CommonOptions<
    string | ((call: { toolName: string; args: unknown }) => string | undefined)
  > {
  /**
   * The tool's own errors: by default they are rethrown once every call of the message settled
   * (as openai's `runTools` does); the claim is released, so a retry runs again. Give a function
   * to send them to the model instead, as the tool's output. @default undefined (rethrow)
   */
  toolErrorOutput?: (error: unknown, call: { toolName: string; args: unknown }) => unknown;
}

/** Which turn the calls belong to, and for whom. */
export interface TurnOptions {
  /** The turn id, e.g. your id of the user message. Wins over the derived one. */
  turnId?: string;
  /** Overrides the dispatcher's scope for these calls. */
  scope?: string;
}

type FunctionCall = { callId: string; name: string; arguments: string };
type DescribedTool =
  | { type: string; name?: string; description?: string | null }
  | { type: string; function: { name: string; description?: string } };

const isUserItem = (item: unknown) =>
  (item as { role?: unknown; type?: unknown }).role === 'user' &&
  [undefined, 'message'].includes((item as { type?: string }).type);

function invalid(message: string): string {
  return modelErrorText(new InvalidInputError({ field: 'arguments', message })) as string;
}

function issuesText(
  issues: ReadonlyArray<{ message?: string; path?: unknown; instancePath?: string }>,
) {
  return issues
    .map((i) => {
      const path = Array.isArray(i.path)
        ? i.path.map((p) => (typeof p === 'object' ? String(p.key) : String(p))).join('.')
        : (i.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.');
      return path === '' ? i.message : `${path}: ${i.message}`;
    })
    .join('; ');
}

/**
 * Runs the function calls the model asked for, idempotently.
 *
 * ```ts
 * const tools = createToolDispatcher(idempotency, { create_ticket: { schema, execute } });
 * messages.push(message, ...(await tools.runChat(message, { messages })));
 * ```
 */
export function createToolDispatcher(
  idempotency: Idempotency,
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Record<string, ToolHandler<any, unknown>>,
  options: ToolDispatcherOptions = {},
) {
  if (idempotency == null || typeof idempotency.run !== 'function') {
    throw new InvalidInputError({
      field: 'idempotency',
      message: 'createToolDispatcher needs the executor: createIdempotency({ store }).',
    });
  }
  const names = Object.keys(handlers ?? {});
  for (const name of names) {
    const h = handlers[name];
    const execute = typeof h === 'function' ? h : h?.execute;
    if (name === '' || typeof execute !== 'function') {
      throw new InvalidInputError({
        field: 'handlers',
        message: `The handler of tool "${name}" must be a function or { execute, schema? }.`,
      });
    }
  }
  const exclude = checkNames('exclude', options.exclude, names);
  const unsafe = checkNames('unsafe', options.unsafe, names);
  const markFresh = options.markFresh ?? false;

  async function parse(name: string, text: string): Promise<{ args: unknown } | { error: string }> {
    let args: unknown;
    try {
      args = JSON.parse(text === '' ? '{}' : text);
    } catch (error) {
      return {
        error: invalid(
          `The arguments of ${name} are not valid JSON (${(error as Error).message}). Nothing ran. Call ${name} again with a JSON object that matches its parameters.`,
        ),
      };
    }
    const handler = handlers[name];
    const schema = typeof handler === 'function' ? undefined : handler?.schema;
    let problem: string | undefined;
    try {
      if (typeof schema === 'function') {
        if (!schema(args)) problem = issuesText(schema.errors ?? []) || 'invalid';
      } else if (schema !== undefined) {
        const result = await schema['~standard'].validate(args);
        if (result.issues === undefined) args = result.value;
        else problem = issuesText(result.issues);
      }
    } catch (error) {
      problem = (error as Error).message;
    }
    if (problem === undefined) return { args };
    return {
      error: invalid(
        `The arguments of ${name} do not match its parameters (${problem}). Nothing ran. Call ${name} again with corrected arguments.`,
      ),
    };
  }

  const wrapped = (name: string) =>
    handlers[name] !== undefined && !exclude.includes(name) && !unsafe.includes(name);

  async function runAll(calls: FunctionCall[], turnId: string | undefined, scope?: string) {
    if (turnId === undefined && calls.some((c) => wrapped(c.name))) {
      throw new InvalidInputError({
        field: 'turnId',
        message:
          'No turn id: pass { turnId } (e.g. your id of the user message), or the input of the request ({ messages } / { input }) with its user message.',
      });
    }
    type Settled = { ok: true; value: unknown } | { ok: false; error: unknown; args: unknown };
    const settled = await Promise.all(
      calls.map(async (call): Promise<Settled> => {
        const handler = handlers[call.name];
        if (handler === undefined) {
          const error = new InvalidInputError({
            field: 'name',
            message: `There is no tool named "${call.name}". Nothing ran. Call one of: ${names.join(', ')}.`,
          });
          return { ok: true, value: modelErrorText(error) };
        }
        const parsed = await parse(call.name, call.arguments);
        if ('error' in parsed) return { ok: true, value: parsed.error };
        const execute = typeof handler === 'function' ? handler : handler.execute;
        const resolvedScope =
          scope ??
          (typeof options.scope === 'function'
            ? options.scope({ toolName: call.name, args: parsed.args })
            : options.scope);
        const { args } = parsed;
        if (!wrapped(call.name) || turnId === undefined) {
          try {
            const ctx = unwrappedContext(call.name, turnId, resolvedScope);
            return { ok: true, value: await execute(args as never, ctx) };
          } catch (error) {
            return { ok: false, error, args };
          }
        }
        const one = { toolName: call.name, turnId, scope: resolvedScope, args };
        const result = await runCall(
          idempotency,
          one,
          execute,
          options.policies?.[call.name],
          markFresh,
        );
        return result.ok ? result : { ...result, args };
      }),
    );
    return settled.map((result, i) => {
      if (result.ok) return result.value;
      if (options.toolErrorOutput === undefined) throw result.error;
      return options.toolErrorOutput(result.error, {
        toolName: (calls[i] as FunctionCall).name,
        args: result.args,
      });
    });
  }

  const content = (value: unknown): string =>
    typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');

  return {
    /** The tool messages answering the `tool_calls` of a Chat Completions assistant message, in order. */
    async runChat(
      message: Pick<ChatCompletionMessage, 'tool_calls'>,
      turn: TurnOptions & {
        /** The `messages` of the request that produced `message`: the turn id is derived from them. */
        messages?: readonly ChatCompletionMessageParam[];
      } = {},
    ): Promise<ChatCompletionToolMessageParam[]> {
      const calls = (message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ callId: c.id, ...c.function }] : [],
      );
      const turnId =
        turn.turnId ?? turnIdFromMessages(turn.messages ?? [], (m) => m.role === 'user');
      const outputs = await runAll(calls, turnId, turn.scope);
      return calls.map((c, i) => ({
        role: 'tool',
        tool_call_id: c.callId,
        content: content(outputs[i]),
      }));
    },
    /** The `function_call_output` items answering the `function_call` items of a Responses output, in order. */
    async runResponses(
      output: readonly ResponseOutputItem[],
      turn: TurnOptions & {
        /** The `input` of the request that produced `output`: the turn id is derived from it. */
        input?: string | ResponseInput;
      } = {},
    ): Promise<ResponseInputItem.FunctionCallOutput[]> {
      const calls = output.flatMap((item) =>
        item.type === 'function_call'
          ? [{ callId: item.call_id, name: item.name, arguments: item.arguments }]
          : [],
      );
      const input = turn.input ?? [];
      const items = typeof input === 'string' ? [{ role: 'user', content: input }] : input;
      const turnId = turn.turnId ?? turnIdFromMessages(items, isUserItem);
      const outputs = await runAll(calls, turnId, turn.scope);
      return calls.map((c, i) => ({
        type: 'function_call_output',
        call_id: c.callId,
        output: content(outputs[i]),
      }));
    },
    /** Copies of your tool definitions (Chat Completions or Responses) with the retry notes appended. */
    describe<T extends DescribedTool>(tools: readonly T[]): T[] {
      return tools.map((tool) => {
        const fn = ('function' in tool ? tool.function : tool) as {
          name?: string;
          description?: string | null;
        };
        const name = fn.name ?? '';
        if (!names.includes(name) || exclude.includes(name)) return tool;
        const description = withRetryNote(fn.description ?? undefined, !unsafe.includes(name));
        return 'function' in tool
          ? { ...tool, function: { ...tool.function, description } }
          : { ...tool, description };
      });
    },
  };
}

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
