/**
 * The SDK's tool runner (`client.beta.messages.toolRunner`) with idempotent tools: its runnable
 * tools (`betaZodTool`, `betaTool`, your own `{ run, parse }`) become a lookup first.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type {
  BetaToolRunner,
  BetaToolRunnerParams,
  BetaToolRunnerRequestOptions,
} from '@anthropic-ai/sdk/lib/tools/BetaToolRunner';
import { ToolError } from '@anthropic-ai/sdk/lib/tools/ToolError';
import type { BetaMessageParam } from '@anthropic-ai/sdk/resources/beta/messages/messages';
import {
  ConfigurationError,
  type ExecutionContext,
  type ExecutorOptions,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import {
  type AdapterOptions,
  audienceOf,
  callOf,
  createAdapter,
  errorText,
  mergeSignals,
  parseArguments,
  parseSchema,
  runCall,
} from '@idempotent-tools/core/adapter-kit';
import { markResult, transcriptOf } from './messages.js';

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
  AdapterOptions<RunnerCall, ToolPolicy<never, Output>>;

const caller = 'idempotentToolRunner';
const ok = Symbol('ok');

const isRunnable = (tool: object): tool is BetaRunnableTool =>
  'run' in tool && 'parse' in tool && 'name' in tool && typeof tool.name === 'string';

/**
 * `client.beta.messages.toolRunner(params, requestOptions)` with the runnable tools of
 * `params.tools` made idempotent: a repeat of a call in the same turn of the same conversation
 * returns the stored output, marked `"replayed": true`, and the tool does not run again. Name,
 * input schema and every other field are kept; descriptions get the retry note. The turn is
 * derived from the runner's messages with `conversationId`, or given as `turnId`.
 *
 * A developer error found while the runner runs (a call whose turn cannot be identified) runs
 * nothing and stops the runner before its next request: it is thrown out of `await runner`,
 * `for await`, `runner.done()`.
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
  if (!Array.isArray(params?.tools)) {
    throw new ConfigurationError({
      option: 'tools',
      message: `${caller}: params.tools must be the array you pass to client.beta.messages.toolRunner.`,
    });
  }
  const tools = params.tools as object[];
  const adapter = createAdapter<RunnerCall>(options as never, {
    caller,
    toolNames: tools.filter(isRunnable).map((t) => t.name),
    otherToolNames: tools.flatMap((t) => (!isRunnable(t) && 'name' in t ? [String(t.name)] : [])),
    transcript: (call) => transcriptOf(call.messages),
    howTo: 'conversationId (your chat id) or turnId (your id of the user message)',
  });
  let runner: BetaToolRunner<Stream> | undefined;
  let failure: unknown;
  const stop = new AbortController();
  const forDeveloper = (error: unknown): never => {
    failure ??= error;
    stop.abort(error); // the runner sends nothing more
    throw new ToolError('Not run: a configuration error went to the developer.');
  };

  const wrap = (tool: BetaRunnableTool): BetaRunnableTool => {
    const treatment = adapter.treatment(tool.name);
    if (treatment === 'exclude') return tool;
    // Only custom tools (with an input_schema) have a description; built-in client tools do not.
    const described =
      'input_schema' in tool
        ? { description: withRetryNote(tool.description, treatment === 'wrap') }
        : {};
    const toJSON = (tool as { toJSON?: () => object }).toJSON?.bind(tool);
    const kept = {
      ...tool,
      ...described,
      ...(toJSON && { toJSON: () => ({ ...toJSON(), ...described }) }),
    };
    if (treatment === 'unsafe') return kept;
    const policy = adapter.policy(tool.name) as ToolPolicy | undefined;
    return {
      ...kept,
      parse: (input) => input, // checked in run, so that bad input gets a text saying what to fix
      async run(input, context) {
        const parsed = await parseArguments(
          tool.name,
          input,
          parseSchema((value) => tool.parse(value)),
        );
        if ('error' in parsed) throw new ToolError(parsed.error);
        const messages = runner?.params.messages ?? [];
        const info = {
          toolName: tool.name,
          input: parsed.args,
          toolUse: context?.toolUse,
          messages,
        };
        let call: ReturnType<typeof callOf>;
        try {
          call = callOf(adapter, info, tool.name, parsed.args, policy);
        } catch (error) {
          if (audienceOf(error) === 'developer') return forDeveloper(error);
          throw new ToolError(errorText(error) ?? String(error));
        }
        const signal = (ctx: ExecutionContext) => mergeSignals(context?.signal, ctx.signal);
        const ran = await runCall(
          adapter,
          call,
          (args, ctx) => tool.run(args, context && { ...context, signal: signal(ctx) }),
          (value, replayed) => ({ [ok]: markResult(value, replayed, adapter.markFresh) }),
        );
        if ('error' in ran)
          return ran.developer ? forDeveloper(ran.error) : Promise.reject(ran.error);
        const output = ran.output as { [ok]: unknown } | string;
        if (typeof output === 'string') throw new ToolError(output); // an idempotency error
        return output[ok] as Output;
      },
    };
  };

  runner = client.beta.messages.toolRunner(
    { ...params, tools: params.tools.map((t) => (isRunnable(t) ? wrap(t) : t)) } as never,
    { ...requestOptions, signal: mergeSignals(requestOptions.signal, stop.signal) },
  ) as BetaToolRunner<Stream>;
  // The runner ends with its abort error when a developer error stopped it: throw that instead.
  const rethrow = (error: unknown): never => {
    throw failure ?? error;
  };
  const iterate = runner[Symbol.asyncIterator].bind(runner);
  runner[Symbol.asyncIterator] = async function* () {
    try {
      return yield* { [Symbol.asyncIterator]: iterate };
    } catch (error) {
      return rethrow(error);
    }
  } as never;
  const done = runner.done.bind(runner);
  runner.done = () => done().catch(rethrow);
  return runner;
}
