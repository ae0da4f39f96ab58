import {
  type ExecutionContext,
  type ExecutorOptions,
  errorForModel,
  executorFrom,
  type Idempotency,
  type IdempotentResult,
  InvalidInputError,
  markReplayed,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import type { Tool, ToolExecutionOptions, ToolSet } from 'ai';
import { turnIdFromModelMessages } from './turn-id.js';

/** One tool call as the AI SDK runs it: what `turnId` and `scope` functions are given. */
export interface ToolCallInfo {
  toolName: string;
  /** The tool input, parsed and validated by the tool's `inputSchema`. */
  input: unknown;
  /**
   * The AI SDK's execution options: `messages`, `context` (this tool's entry of
   * `toolsContext`), `toolCallId`, `abortSignal`.
   */
  options: ToolExecutionOptions<unknown>;
}

/** A per-call value: fixed, or computed from the call. */
export type PerCall = string | ((call: ToolCallInfo) => string | undefined);

export interface WrapOptions {
  /**
   * The conversation turn. A string (wrap per request), or a function of the call; when it is
   * not given or returns undefined: the `turnId` string of the tool's `context` (its
   * `toolsContext` entry), else a hash of `options.messages` up to the last user message
   * (`turnIdFromModelMessages`). Never the tool-call id: it is new on every retry.
   * @default derived as above
   */
  turnId?: PerCall;
  /**
   * Tenant / user: records of one scope are invisible to another.
   * @default undefined (one global scope)
   */
  scope?: PerCall;
  /**
   * Also mark fresh outputs (`replayed: false`), not only replays.
   * @default false
   */
  markFresh?: boolean;
}

/** The policy type of a tool: its input and (final) output types. */
export type PolicyOf<T> = T extends {
  execute?: ((input: infer I, options: never) => infer R) | undefined;
}
  ? ToolPolicy<I, R extends AsyncIterable<infer O> ? O : Awaited<R>>
  : ToolPolicy;

/** Options of `idempotentTools(tools, options)`. */
export type IdempotentToolsOptions<TOOLS extends ToolSet> = ExecutorOptions &
  WrapOptions & {
    /**
     * Per-tool policy (ttl, lease, businessKey, reconcile, onStale, isTerminalError...), by name.
     * @default {} (the executor's defaults)
     */
    policies?: { [K in keyof TOOLS]?: PolicyOf<TOOLS[K]> };
    /**
     * Tools left exactly as they are (read-only tools).
     * @default []
     */
    exclude?: ReadonlyArray<keyof TOOLS & string>;
    /**
     * Tools not made idempotent: each call runs again, and their description gets the
     * "not safe to retry" note.
     * @default []
     */
    unsafe?: ReadonlyArray<keyof TOOLS & string>;
  };

/** Options of `idempotentTool(name, tool, options)`. */
export type IdempotentToolOptions<TOOL extends Tool> = ExecutorOptions &
  WrapOptions & {
    /** The tool's policy. @default {} (the executor's defaults) */
    policy?: PolicyOf<TOOL>;
    /** Leave `execute` as it is and add the "not safe to retry" note. @default false */
    unsafe?: boolean;
  };

type ToolResultOutput = Awaited<ReturnType<NonNullable<Tool['toModelOutput']>>>;
type Execute = NonNullable<Tool['execute']>;

/** Marked outputs of this process -> the original output (for `toModelOutput`). */
const marks = new WeakMap<object, { value: unknown; replayed: boolean }>();
/** Options given to a wrapped `execute` -> its idempotency context. */
const contexts = new WeakMap<object, ExecutionContext>();

/**
 * The idempotency context of a wrapped call, from the options your `execute` received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(options: object): ExecutionContext | undefined {
  return contexts.get(options);
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return (
    value != null &&
    typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function'
  );
}

/** An idempotency error, as the model reads it: `error.toString()` is the `errorForModel` JSON. */
function forModel(error: unknown): unknown {
  const shown = errorForModel(error);
  if (shown !== undefined && typeof error === 'object' && error !== null) {
    const text = JSON.stringify(shown);
    Object.defineProperty(error, 'toString', { value: () => text, configurable: true });
  }
  return error;
}

/** The model output of `toModelOutput`, marked like a plain output would be. */
function markModelOutput(output: ToolResultOutput, replayed: boolean): ToolResultOutput {
  switch (output.type) {
    case 'text':
    case 'json':
      return {
        ...output,
        type: 'json',
        value: markReplayed(output.value, replayed, { markFresh: true }) as never,
      };
    case 'content':
      return {
        ...output,
        value: [...output.value, { type: 'text', text: `{"replayed":${replayed}}` }],
      };
    default:
      return output;
  }
}

function checkPerCall(field: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'string' && typeof value !== 'function') {
    throw new InvalidInputError({
      field,
      message: `${field} must be a string or a function of the tool call, got ${typeof value}.`,
    });
  }
}

function retryNote(tool: Tool, safe: boolean): Partial<Tool> {
  if (tool.type === 'provider') return {}; // provider tools have no description of their own
  const description = tool.description;
  return {
    description:
      typeof description === 'function'
        ? (options) => withRetryNote(description(options), safe)
        : withRetryNote(description, safe),
  } as Partial<Tool>;
}

function wrapTool(
  name: string,
  tool: Tool,
  executor: Idempotency,
  options: WrapOptions,
  policy: ToolPolicy | undefined,
): Tool {
  const execute = tool.execute as Execute | undefined;
  if (execute === undefined) return tool; // provider-executed, or run by the client
  const { turnId, scope, markFresh = false } = options;

  const mark = (value: unknown, replayed: boolean): unknown => {
    const marked = markReplayed(value, replayed, { markFresh });
    if (marked !== value && typeof marked === 'object' && marked !== null) {
      marks.set(marked, { value, replayed });
    }
    return marked;
  };

  const run = async (
    input: unknown,
    toolOptions: ToolExecutionOptions<unknown>,
    emit?: (output: unknown) => void,
  ): Promise<IdempotentResult<unknown>> => {
    const info: ToolCallInfo = { toolName: name, input, options: toolOptions };
    const context = toolOptions.context as { turnId?: unknown } | undefined;
    const turn =
      (typeof turnId === 'function' ? turnId(info) : turnId) ??
      (typeof context?.turnId === 'string' ? context.turnId : undefined) ??
      turnIdFromModelMessages(toolOptions.messages ?? []);
    if (turn === undefined && policy?.businessKey === undefined) {
      throw new InvalidInputError({
        field: 'turnId',
        message: `No turn id for ${name}: the conversation has no user message. Pass turnId to idempotentTools, or give the tool a businessKey.`,
      });
    }
    const call = {
      toolName: name,
      turnId: turn,
      scope: typeof scope === 'function' ? scope(info) : scope,
      args: input,
    };
    return executor.run(
      call,
      async (args, ctx) => {
        const signal =
          toolOptions.abortSignal === undefined
            ? ctx.signal
            : AbortSignal.any([toolOptions.abortSignal, ctx.signal]);
        const innerOptions = { ...toolOptions, abortSignal: signal };
        contexts.set(innerOptions, ctx);
        const output = execute(args, innerOptions);
        if (!isAsyncIterable(output)) return await output;
        let last: unknown;
        for await (const part of output) {
          last = part;
          emit?.(part);
        }
        return last; // the final output of a streaming tool is what is stored
      },
      policy,
    );
  };

  const wrapped =
    Object.prototype.toString.call(execute) === '[object AsyncGeneratorFunction]'
      ? async function* streaming(input: unknown, toolOptions: ToolExecutionOptions<unknown>) {
          const parts: unknown[] = [];
          let wake: (() => void) | undefined;
          let settled = false;
          const running = run(input, toolOptions, (part) => {
            parts.push(part);
            wake?.();
          }).finally(() => {
            settled = true;
            wake?.();
          });
          running.catch(() => {}); // awaited below
          for (;;) {
            while (parts.length > 0) yield parts.shift();
            if (settled) break;
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
          }
          let result: IdempotentResult<unknown>;
          try {
            result = await running;
          } catch (error) {
            throw forModel(error);
          }
          // A fresh run already yielded its final output; a replay yields the stored one.
          if (result.replayed || markFresh) yield mark(result.value, result.replayed);
        }
      : async (input: unknown, toolOptions: ToolExecutionOptions<unknown>) => {
          try {
            const result = await run(input, toolOptions);
            return mark(result.value, result.replayed);
          } catch (error) {
            throw forModel(error);
          }
        };

  const toModelOutput = tool.toModelOutput;
  return {
    ...tool,
    ...retryNote(tool, true),
    execute: wrapped as Execute,
    ...(toModelOutput === undefined
      ? {}
      : {
          toModelOutput: async (part: Parameters<typeof toModelOutput>[0]) => {
            const marked =
              typeof part.output === 'object' && part.output !== null
                ? marks.get(part.output)
                : undefined;
            if (marked === undefined) return toModelOutput(part);
            const output = await toModelOutput({ ...part, output: marked.value });
            return markModelOutput(output, marked.replayed);
          },
        }),
  } as Tool;
}

/**
 * Make a tool set idempotent: each tool's `execute` becomes a lookup first, so a repeat of the
 * same call in the same turn replays the stored output (marked `replayed: true`) instead of
 * running the side effect again. Every other field is kept; tools without `execute`
 * (provider-executed) are returned untouched.
 *
 * ```ts
 * const tools = idempotentTools({ chargeCard, sendEmail }, { store: openSqliteStore('agent.db') });
 * await generateText({ model, tools, prompt, stopWhen: isStepCount(5) });
 * ```
 */
export function idempotentTools<TOOLS extends ToolSet>(
  tools: TOOLS,
  options: IdempotentToolsOptions<TOOLS>,
): TOOLS {
  if (tools === null || typeof tools !== 'object' || Array.isArray(tools)) {
    throw new InvalidInputError({
      field: 'tools',
      message:
        'idempotentTools takes the tool set you pass to generateText: { name: tool({...}) }.',
    });
  }
  const executor = executorFrom(options, 'idempotentTools');
  checkPerCall('turnId', options.turnId);
  checkPerCall('scope', options.scope);
  const exclude = new Set<string>(options.exclude ?? []);
  const unsafe = new Set<string>(options.unsafe ?? []);
  for (const [field, names] of [
    ['exclude', exclude],
    ['unsafe', unsafe],
  ] as const) {
    for (const name of names) {
      if (!Object.hasOwn(tools, name)) {
        throw new InvalidInputError({
          field,
          message: `${field} names "${name}", which is not a tool of the set. Check the spelling.`,
        });
      }
    }
  }
  const policies = (options.policies ?? {}) as Record<string, ToolPolicy | undefined>;
  const wrapped: Record<string, Tool> = {};
  for (const [name, tool] of Object.entries(tools) as [string, Tool][]) {
    if (tool === null || typeof tool !== 'object') {
      throw new InvalidInputError({
        field: 'tools',
        message: `Tool "${name}" is not a tool object: define it with tool({ ... }).`,
      });
    }
    if (tool.execute !== undefined && typeof tool.execute !== 'function') {
      throw new InvalidInputError({
        field: 'execute',
        message: `Tool "${name}" has an execute that is not a function.`,
      });
    }
    if (exclude.has(name)) wrapped[name] = tool;
    else if (unsafe.has(name)) wrapped[name] = { ...tool, ...retryNote(tool, false) } as Tool;
    else wrapped[name] = wrapTool(name, tool, executor, options, policies[name]);
  }
  return wrapped as TOOLS;
}

/** Make one tool idempotent (see `idempotentTools`); `name` is the tool's name in the tool set. */
export function idempotentTool<TOOL extends Tool>(
  name: string,
  tool: TOOL,
  options: IdempotentToolOptions<TOOL>,
): TOOL {
  if (typeof name !== 'string' || name === '') {
    throw new InvalidInputError({
      field: 'toolName',
      message: 'idempotentTool(name, tool, options) needs the tool name as a non-empty string.',
    });
  }
  const { policy, unsafe, ...rest } = options;
  const set = idempotentTools(
    { [name]: tool } as Record<string, TOOL>,
    {
      ...rest,
      ...(policy === undefined ? {} : { policies: { [name]: policy } }),
      ...(unsafe === true ? { unsafe: [name] } : {}),
    } as IdempotentToolsOptions<Record<string, TOOL>>,
  );
  return set[name] as TOOL;
}
