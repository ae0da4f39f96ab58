/**
 * A dispatcher for hand-written Messages API loops: run the `tool_use` blocks of a reply
 * (`messages.create`, `messages.stream(...).finalMessage()`, a thread's `send`) idempotently and
 * return the user message of `tool_result` blocks that answers them.
 */
import { toolErrorContent } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages';
import {
  ConfigurationError,
  type ExecutionContext,
  type Idempotency,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type AdapterOptions,
  checkPerCall,
  createAdapter,
  dispatchCalls,
  type PerCall,
  type StandardSchema,
  type ValidateFunction,
} from '@idempotent-tools/core/adapter-kit';
import { markResult, resultContent, transcriptOf } from './messages.js';

/** One tool: a function, or `{ execute, schema }`. */
export type ToolHandler<Args = never, Result = unknown> =
  | ((args: Args, context: ExecutionContext) => Result | Promise<Result>)
  | {
      execute: (args: Args, context: ExecutionContext) => Result | Promise<Result>;
      /** Checks the input before anything runs; a Standard Schema's output becomes the args. */
      schema?: StandardSchema<Args> | ValidateFunction;
    };

/** Which turn the calls of one `run` belong to, and for whom. */
export interface TurnOptions {
  /** Your id of the user turn (e.g. of the user message). Wins over every other source. */
  turnId?: string | undefined;
  /** Your chat / thread id: with it the turn is derived from the conversation's user messages. */
  conversationId?: string | undefined;
  /** Overrides the dispatcher's scope for these calls. */
  scope?: string | undefined;
}

/** One call as the `turnId`, `conversationId` and `scope` functions of the options get it. */
export interface DispatchCall {
  toolName: string;
  args: unknown;
  /** The second argument of `run` (its turn options and messages). */
  request: Readonly<TurnOptions>;
}

export type ToolDispatcherOptions = AdapterOptions<DispatchCall, ToolPolicy<never, unknown>>;

type ToolUse = { type: 'tool_use'; id: string; name: string; input: unknown };
type Conversation = readonly { role: string; content?: unknown }[];
const said = Symbol('transcript');
type Call = DispatchCall & { [said]: ReturnType<typeof transcriptOf> };
const caller = 'createToolDispatcher';
/** Marks what a tool returned, apart from the model's error texts the kit hands back as output. */
const ok = Symbol('ok');

/**
 * Runs the tool calls of a Messages API reply, idempotently.
 *
 * ```ts
 * const tools = createToolDispatcher(idempotency, { create_ticket: { schema, execute } });
 * messages.push({ role: 'assistant', content: reply.content });
 * messages.push(await tools.run(reply, { messages, conversationId: chat.id }));
 * ```
 */
export function createToolDispatcher(
  idempotency: Idempotency,
  // biome-ignore lint/suspicious/noExplicitAny: each handler has its own argument type
  handlers: Record<string, ToolHandler<any, unknown>>,
  options: ToolDispatcherOptions = {},
) {
  const names = Object.keys(handlers ?? {});
  const handler = (name: string) => {
    const h = handlers[name];
    return typeof h === 'function' ? { execute: h, schema: undefined } : h;
  };
  for (const name of names) {
    if (typeof handler(name)?.execute !== 'function') {
      throw new ConfigurationError({
        option: 'handlers',
        message: `${caller}: the handler of tool "${name}" must be a function or { execute, schema? }.`,
      });
    }
  }
  checkPerCall('turnId', options.turnId, caller);
  checkPerCall('conversationId', options.conversationId, caller);
  const given = (value: PerCall<DispatchCall> | undefined, call: Call) =>
    typeof value === 'function' ? value(call) : value;
  const adapter = createAdapter<Call>(
    {
      ...options,
      idempotency,
      turnId: (call) => call.request.turnId ?? given(options.turnId, call),
      conversationId: (call) => call.request.conversationId ?? given(options.conversationId, call),
    },
    {
      caller,
      toolNames: names,
      howTo:
        'conversationId (your chat id: tools.run(reply, { messages, conversationId }), or the option as a function of the call) or turnId (your id of the user message)',
      transcript: (call) => call[said],
    },
  );
  // What runs: the handler; an unwrapped one's output gets the mark that wrapped outputs get.
  const execute = (name: string) => {
    const run = handler(name)?.execute as (args: unknown, context: ExecutionContext) => unknown;
    if (adapter.treatment(name) === 'wrap') return run;
    return async (args: unknown, context: ExecutionContext) => ({ [ok]: await run(args, context) });
  };

  return {
    /**
     * The user message answering the `tool_use` blocks of `reply`: one `tool_result` per call,
     * in order. Pass the `messages` of the request that produced `reply`. Bad input, an
     * idempotency error or the tool's own error is an `is_error` result.
     *
     * @throws ConfigurationError when a call's turn cannot be identified (nothing ran)
     */
    async run(
      reply: { content: readonly { type: string }[] },
      turn: TurnOptions & { messages?: Conversation } = {},
    ): Promise<{ role: 'user'; content: ToolResultBlockParam[] }> {
      const uses = reply.content.filter((b): b is ToolUse => b.type === 'tool_use');
      const transcript = transcriptOf(turn.messages);
      const outcomes = await dispatchCalls(
        adapter,
        uses.map((use) => ({ name: use.name, arguments: use.input })),
        {
          names,
          handler: (name) =>
            names.includes(name)
              ? { execute: execute(name), schema: handler(name)?.schema }
              : undefined,
          info: (toolName, args) => ({ toolName, args, request: turn, [said]: transcript }),
          mark: (value, replayed) => ({ [ok]: markResult(value, replayed, adapter.markFresh) }),
        },
      );
      return {
        role: 'user',
        content: uses.map((use, i) => {
          const outcome = outcomes[i] as { output: unknown } | { error: unknown };
          const fine = 'output' in outcome && typeof outcome.output === 'object';
          const content = (
            'error' in outcome
              ? toolErrorContent(outcome.error) // the claim was released: a retry runs again
              : fine
                ? resultContent((outcome.output as { [ok]: unknown })[ok])
                : outcome.output
          ) as NonNullable<ToolResultBlockParam['content']>; // the model's error text (bad input, an idempotency error)
          return { type: 'tool_result', tool_use_id: use.id, content, ...(!fine && { is_error }) };
        }),
      };
    },
    /** Copies of your tool definitions with the retry notes appended to their descriptions. */
    describe<T extends { name?: string; description?: string | undefined }>(
      tools: readonly T[],
    ): T[] {
      return tools.map((tool) => {
        const name = tool.name ?? '';
        if (!names.includes(name) || adapter.treatment(name) === 'exclude') return tool;
        return {
          ...tool,
          description: withRetryNote(tool.description, adapter.treatment(name) === 'wrap'),
        };
      });
    },
  };
}

const is_error = true;

export type ToolDispatcher = ReturnType<typeof createToolDispatcher>;
