/**
 * Tool results of APIs whose results are text or content blocks (Anthropic's `tool_result`, MCP):
 * the replay mark keeping that shape, and a tool's own output told apart from the model's error
 * texts that a call can come back with instead.
 */
import { isContentBlocks, markContent, markOutput } from './calls.js';
import type {
  DispatchCall,
  Dispatcher,
  DispatchHandler,
  DispatchOptions,
  DispatchOutcome,
} from './dispatch-calls.js';

/**
 * A tool's result with its replay mark, keeping its shape: text stays text (a JSON object's text
 * gets `"replayed"` merged in, other text a `{"replayed":true}` line), content blocks stay blocks
 * (`markContent`), any other value gets `markOutput`. A fresh result is returned unchanged unless
 * `markFresh`.
 */
export function markToolResult(value: unknown, replayed: boolean, markFresh: boolean): unknown {
  if (!replayed && !markFresh) return value;
  if (typeof value !== 'string') return markOutput(value, replayed, markFresh);
  return (markContent([{ type: 'text', text: value }], replayed)[0] as { text: string }).text;
}

/** Result content: text and content blocks as they are, any other value as JSON text. */
export function toolResultContent(value: unknown): string | { type: string }[] {
  if (typeof value === 'string' || isContentBlocks(value)) return value;
  return JSON.stringify(value) ?? 'null';
}

const OWN = Symbol('idempotent-tools.own-output');

/**
 * What a tool returned, boxed: `runCall` and `dispatchCalls` hand back the model's error texts
 * (bad input, an unknown tool, an idempotency error) as outputs too, and a tool may return text.
 */
export function boxOutput(value: unknown): { [OWN]: unknown } {
  return { [OWN]: value };
}

/** The tool's own output of a boxed output (`boxOutput`); undefined for anything else. */
export function unboxOutput(output: unknown): { value: unknown } | undefined {
  if (typeof output !== 'object' || output === null || !(OWN in output)) return undefined;
  return { value: output[OWN] };
}

/**
 * Options of a dispatcher's `run` that box what every tool returns (`boxOutput`): a wrapped
 * tool's output marked by `mark` (default `markToolResult`), an unwrapped one's as it is.
 */
export function boxedOutputs<Info extends DispatchCall>(
  dispatcher: Dispatcher<Info>,
  mark: (value: unknown, replayed: boolean) => unknown = (value, replayed) =>
    markToolResult(value, replayed, dispatcher.adapter.markFresh),
): Required<Pick<DispatchOptions<Info>, 'handler' | 'mark'>> {
  return {
    mark: (value, replayed) => boxOutput(mark(value, replayed)),
    handler(name) {
      const handler = dispatcher.handler(name);
      if (handler === undefined || dispatcher.adapter.treatment(name) === 'wrap') return handler;
      const execute: DispatchHandler<Info>['execute'] = async (args, context, call) =>
        boxOutput(await handler.execute(args, context, call));
      return { ...handler, execute };
    },
  };
}

/**
 * An outcome of a boxed run (`boxedOutputs`) as a tool result: the tool's own output as its
 * content (`toolResultContent`); the model's error text, or the tool's own error as
 * `errorContent` makes it, as an error result.
 */
export function toolResultOf(
  outcome: DispatchOutcome<unknown>,
  errorContent: (error: unknown) => unknown,
): { content: unknown; isError: boolean } {
  if ('error' in outcome) return { content: errorContent(outcome.error), isError: true };
  const own = unboxOutput(outcome.output);
  if (own === undefined) return { content: outcome.output, isError: true };
  return { content: toolResultContent(own.value), isError: false };
}
