import {
  ConfigurationError,
  type ExecutionContext,
  type IdempotentResult,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { CallbackManagerForToolRun } from '@langchain/core/callbacks/manager';
import { isDirectToolOutput, ToolMessage } from '@langchain/core/messages';
import type { StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import type { CallContext, IdempotencyMetadata, ToolLike } from './types.js';

const require = kit.requireNear(import.meta.url);
/** Where the idempotency key is put in the tool's config: read it with `getIdempotencyKey`. */
const KEY_FIELD = 'idempotency_key';

/** True for a tool made by `idempotentTool`, `idempotentTools` or the middleware. */
export const isIdempotentTool = (tool: unknown): boolean =>
  typeof tool === 'object' && kit.isWrapped(tool);

/** The idempotency key of the running call, to send on as the vendor's `Idempotency-Key`. */
export function getIdempotencyKey(config: ToolRunnableConfig | undefined): string | undefined {
  const key = config?.configurable?.[KEY_FIELD];
  return typeof key === 'string' ? key : undefined;
}

/** `ToolMessage.metadata.idempotency` of a message made by a wrapped tool. */
export const idempotencyOf = (message: unknown): IdempotencyMetadata | undefined =>
  ToolMessage.isInstance(message)
    ? (message.metadata?.idempotency as IdempotencyMetadata)
    : undefined;

type Result = IdempotentResult<unknown>;
type Call = (arg: unknown, run?: CallbackManagerForToolRun, config?: ToolRunnableConfig) => unknown;
type Callable = StructuredToolInterface & {
  _call: Call;
  metadata?: object;
  responseFormat?: string;
};

/** Throw unless `tool` is a LangChain tool (`tool()`, `StructuredTool`, `DynamicStructuredTool`). */
export function checkTool(tool: unknown, caller: string): asserts tool is Callable {
  const t = tool as Partial<Callable> | null;
  if (t !== null && typeof t === 'object' && typeof t._call === 'function') return;
  throw new ConfigurationError({
    option: 'tools',
    message: `${caller} takes LangChain tools (made with tool(), or StructuredTool / DynamicStructuredTool instances); got ${t === null ? 'null' : typeof t}.`,
  });
}

/** The ToolMessage content of a value (a JSON round trip), as `@langchain/core` formats it. */
type Content = ToolMessage['content'];
const toContent = (value: unknown): Content =>
  typeof value === 'string' || kit.isContentBlocks(value)
    ? (value as Content)
    : (JSON.stringify(value) ?? '');

/**
 * The tool, made idempotent: an object of the same class (its prototype is the original), with
 * the same name, the kit's presentation (the note, the repeat argument in the schema LangChain
 * parses the input with and binds for the model), and a `_call` that runs the original once per
 * turn + arguments (the kit's pipeline). Developer errors are thrown, after `onRefusal` heard of
 * them; the model's become an error ToolMessage. Wrapping the result again is refused.
 */
export function wrapTool<T extends ToolLike>(
  tool: T,
  adapter: kit.Adapter<CallContext>,
  caller: string,
  onRefusal?: (toolCallId: string, error: unknown) => void,
): T {
  const toolName = tool.name;
  const shown = kit.presentTool(adapter as kit.Adapter<never>, toolName, caller);
  if (shown.treatment === 'exclude') return tool;
  kit.refuseWrapped(toolName, tool, caller);
  const original = tool as unknown as Callable;
  const wrapped = kit.markWrapped(Object.create(tool) as Callable);
  const field = { writable: true, enumerable: true, configurable: true };
  const own = (name: string, value: unknown) =>
    Object.defineProperty(wrapped, name, { ...field, value });
  own('description', shown.describe(tool.description));
  if (shown.treatment === 'unsafe') return wrapped as unknown as T;
  const { schema } = original as { schema?: { _zod?: unknown; _def?: unknown } };
  const zod = schema?._zod !== undefined || schema?._def !== undefined;
  if (shown.repeats)
    own('schema', zod ? shown.zodSchema(schema, require) : shown.jsonSchema(schema));
  const pair = original.responseFormat === 'content_and_artifact';
  wrapped.responseFormat = 'content'; // `call` passes our finished ToolMessage on in this format only
  const reply = (
    id: string,
    content: Content,
    idempotency: IdempotencyMetadata,
    artifact?: unknown,
  ) =>
    new ToolMessage({
      status: idempotency.outcome === 'error' ? 'error' : 'success',
      content,
      artifact,
      tool_call_id: id,
      name: toolName,
      metadata: { ...original.metadata, idempotency },
    });

  wrapped._call = kit.markWrapped(async (input, runManager, parent) => {
    const config = (parent ?? {}) as ToolRunnableConfig & { state?: unknown };
    const scratch = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown };
    const state = (config.state ?? scratch?.currentTaskInput) as CallContext['state'];
    const { toolCall } = config;
    const id = toolCall?.id; // as `call` decides whether to answer with a ToolMessage
    /** What the tool returned when it ran now (a ToolMessage or Command goes out as built). */
    let fresh: unknown;
    const execute = async (args: unknown, exec: ExecutionContext) => {
      const out = original._call.call(tool, args, runManager, {
        ...config,
        signal: kit.mergeSignals(config.signal, exec.signal),
        configurable: { ...config.configurable, [KEY_FIELD]: exec.key },
      });
      fresh = await kit.drain(await out, (part) => runManager?.handleToolEvent?.(part), 'return');
      return fresh;
    };
    const mark = (value: unknown, replayed: boolean, { key, outcome }: Result) => {
      // The executor hands back a JSON round trip, no longer a ToolMessage or Command.
      if (!replayed && isDirectToolOutput(fresh)) return fresh;
      if (pair && !(Array.isArray(value) && value.length === 2)) return value;
      const [content, artifact] = pair ? (value as unknown[]) : [value];
      const marked = kit.markOutput(content, replayed, adapter.markFresh);
      if (!id) return marked; // as `call` does without a tool call: the content only
      return reply(id, toContent(marked), { key, replayed, outcome }, artifact);
    };
    const info = (args: unknown) => ({ toolName, args, toolCall, state, config });
    // `input`: parsed by the tool's schema.
    const given = { toolName, input, parsed: true, info };
    const outcome = await kit.settlePipeline(adapter, given, execute, mark);
    if ('developer' in outcome && id) onRefusal?.(id, outcome.developer);
    if (!id || !('text' in outcome)) return kit.orThrow(outcome);
    const key = (outcome.cause as { key?: string } | undefined)?.key;
    const { error } = JSON.parse(outcome.text) as { error: string };
    return reply(id, outcome.text, { key, replayed: false, outcome: 'error', error });
  });
  return wrapped as unknown as T;
}
