/**
 * The SDK's tool runner (`client.beta.messages.toolRunner`) with idempotent tools: its runnable
 * tools (`betaZodTool`, `betaTool`, your own `{ run, parse }`) become a lookup first.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type {
  BetaRunnableTool,
  BetaToolRunContext,
} from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type {
  BetaToolRunner,
  BetaToolRunnerParams,
  BetaToolRunnerRequestOptions,
} from '@anthropic-ai/sdk/lib/tools/BetaToolRunner';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import type { BetaMessageParam } from '@anthropic-ai/sdk/resources/beta/messages/messages';
import type { ExecutorOptions, ToolPolicy } from '@idempotent-tools/core';
import {
  type AdapterOptions,
  createRunnerStop,
  createToolListAdapter,
  markToolResult,
  markWrapped,
  mergeSignals,
  parseSchema,
  presentTool,
  type RepeatablePolicy,
  type RunnerStop,
  runPipeline,
} from '@idempotent-tools/core/adapter-kit';
import { transcriptOf } from './messages.js';

/** One tool call as the `turnId`, `conversationId` and `scope` functions get it. */
export interface RunnerCall {
  toolName: string;
  /** The input, after the tool's `parse`. */
  input: unknown;
  /** The runner's `tool_use` block of the call. */
  toolUse: { id: string; name: string; input: unknown } | undefined;
  /** The runner's conversation (`runner.params.messages`) when the call runs. */
  messages: readonly BetaMessageParam[];
}

type Output = string | Exclude<Awaited<ReturnType<BetaRunnableTool['run']>>, string>;

/** Options of `idempotentToolRunner`: the executor's (or `{ idempotency }`) and the identity. */
export type IdempotentToolRunnerOptions = ExecutorOptions &
  AdapterOptions<RunnerCall, ToolPolicy<never, Output> & RepeatablePolicy>;

const isRunnable = (tool: object): tool is BetaRunnableTool =>
  'run' in tool && 'parse' in tool && 'name' in tool && typeof tool.name === 'string';

/**
 * `client.beta.messages.toolRunner(params, requestOptions)` with the runnable tools of
 * `params.tools` made idempotent (see the README). A developer error found while the runner runs
 * stops it before its next request and is thrown out of every way it is read: `await runner`,
 * `runner.runUntilDone()`, `runner.done()`, `for await (... of runner)` (in place of the next
 * message or stream), `runner.generateToolResponse()`.
 *
 * @throws ConfigurationError at once for a setup that can never tell conversations apart, a
 *   misspelt option, a bad policy, a tool name the API rejects
 */
export function idempotentToolRunner<Stream extends boolean = false>(
  client: Anthropic,
  params: BetaToolRunnerParams & { stream?: Stream },
  options: IdempotentToolRunnerOptions,
  requestOptions: BetaToolRunnerRequestOptions = {},
): BetaToolRunner<Stream> {
  const caller = 'idempotentToolRunner';
  const adapter = createToolListAdapter<RunnerCall, BetaRunnableTool>(params?.tools, options, {
    caller,
    repeatable: true,
    list: 'params.tools must be the array you pass to client.beta.messages.toolRunner',
    isTool: isRunnable,
    transcript: (call) => transcriptOf(call.messages),
    howTo: 'conversationId (your chat id) or turnId (your id of the user message)',
  });
  let runner: BetaToolRunner<Stream> | undefined;
  const stop = createRunnerStop();
  const forDeveloper = (error: unknown): never => {
    stop.stop(error);
    runner?.setRequestOptions((options) => options); // its next request goes out aborted
    throw new ToolError('Not run: a configuration error went to the developer.');
  };

  const wrap = (tool: BetaRunnableTool): BetaRunnableTool => {
    const presented = presentTool(adapter, tool.name, caller);
    if (presented.treatment === 'exclude') return tool;
    // Only custom tools (with an input_schema) have a description; built-in client tools do not.
    const strict = (tool as { strict?: boolean }).strict === true;
    const described =
      'input_schema' in tool
        ? {
            description: presented.describe(tool.description),
            ...(presented.repeats && {
              input_schema: presented.jsonSchema(tool.input_schema, strict),
            }),
          }
        : {};
    const toJSON = (tool as { toJSON?: () => object }).toJSON?.bind(tool);
    const kept = {
      ...tool,
      ...described,
      ...(toJSON && { toJSON: () => ({ ...toJSON(), ...described }) }),
    };
    if (presented.treatment === 'unsafe') return kept;
    // Marked, so that a runner made from this runner's tools (`runner.params.tools`) is refused.
    const run = markWrapped(async (input: unknown, context?: BetaToolRunContext) => {
      const ran = await runPipeline(
        adapter,
        {
          toolName: tool.name,
          input,
          schema: parseSchema((value) => tool.parse(value)),
          info: (args) => ({
            toolName: tool.name,
            input: args,
            toolUse: context?.toolUse,
            messages: runner?.params.messages ?? [],
          }),
        },
        (args, ctx) =>
          tool.run(
            args,
            context && { ...context, signal: mergeSignals(context.signal, ctx.signal) },
          ),
        (value, replayed) => markToolResult(value, replayed, adapter.markFresh),
      );
      if ('developer' in ran) return forDeveloper(ran.developer);
      if ('error' in ran) throw ran.error; // the tool's own: the runner makes its is_error result
      if ('text' in ran) throw new ToolError(ran.text); // bad input, an idempotency error
      return ran.output as Output;
    });
    // `parse` is checked in run, so that bad input gets a text saying what to fix.
    return { ...kept, parse: (input) => input, run };
  };

  runner = client.beta.messages.toolRunner(
    { ...params, tools: params.tools.map((t) => (isRunnable(t) ? wrap(t) : t)) } as never,
    requestOptions,
  ) as BetaToolRunner<Stream>;
  // The runner ends with its abort error when a developer error stopped it: throw that instead.
  return guard(stop, stop.guard(runner, []));
}

/**
 * A stop aborts the runner's requests from the next one on (the one streaming, and the calls
 * running, are left to end: a yielded stream reads to its end). After it the runner's own
 * results are not handed out: what it yields next and its end (`done()`,
 * `generateToolResponse()`, even a run that ended there, `max_iterations`) are the developer
 * error instead, which is also thrown into the runner so that its `done()` settles.
 */
function guard<Stream extends boolean>(
  stop: RunnerStop,
  runner: BetaToolRunner<Stream>,
): BetaToolRunner<Stream> {
  const stopped = () => stop.signal.aborted;
  const settled = <T>(promise: Promise<T>): Promise<T> =>
    promise.then(
      (value) => {
        if (stopped()) throw stop.signal.reason;
        return value;
      },
      (error: unknown) => {
        throw stopped() ? stop.signal.reason : error;
      },
    );
  const setRequestOptions = runner.setRequestOptions.bind(runner);
  runner.setRequestOptions = (
    options:
      | BetaToolRunnerRequestOptions
      | ((previous: BetaToolRunnerRequestOptions) => BetaToolRunnerRequestOptions),
  ) =>
    setRequestOptions((previous) => {
      const next = typeof options === 'function' ? options(previous) : { ...previous, ...options };
      return stopped() ? { ...next, signal: mergeSignals(next.signal, stop.signal) } : next;
    });
  const iterate = runner[Symbol.asyncIterator].bind(runner);
  runner[Symbol.asyncIterator] = async function* () {
    const items = iterate();
    let open = true;
    try {
      for (;;) {
        const item = await settled(items.next()).catch(async (error: unknown) => {
          open = false;
          await items.throw?.(error).catch(() => undefined); // a run that ended: a no-op
          throw error;
        });
        if (item.done === true) {
          open = false;
          return item.value;
        }
        yield item.value;
      }
    } finally {
      // Left early (the app's loop body threw the developer error, say): the run ends too.
      if (open && stopped()) await items.throw?.(stop.signal.reason).catch(() => undefined);
      else if (open) await items.return?.();
    }
  } as BetaToolRunner<Stream>[typeof Symbol.asyncIterator];
  const done = runner.done.bind(runner);
  // After a failed run the runner's `done()` waits for another run: none can succeed now.
  runner.done = () => (stopped() ? Promise.reject(stop.signal.reason) : settled(done()));
  const generate = runner.generateToolResponse.bind(runner);
  runner.generateToolResponse = (signal) => settled(generate(signal));
  return runner;
}
