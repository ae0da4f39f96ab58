import type { ExecutionContext } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { CallbackManagerForToolRun } from '@langchain/core/callbacks/manager';
import { isDirectToolOutput, ToolMessage } from '@langchain/core/messages';
import type { StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import type { CallContext, IdempotencyMetadata, ToolLike } from './types.js';

const load = kit.requireNear(import.meta.url);
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

type Call = (arg: unknown, run?: CallbackManagerForToolRun, config?: ToolRunnableConfig) => unknown;
type Callable = StructuredToolInterface & {
  _call: Call;
  metadata?: object;
  responseFormat?: string;
};

/** How the kit checks the tools: LangChain tools run a call with `_call`. */
export const TOOLS = {
  takes: 'LangChain tools (made with tool(), or StructuredTool / DynamicStructuredTool instances)',
  method: '_call',
};

/** The ToolMessage content of a value (a JSON round trip), as `@langchain/core` formats it. */
type Content = ToolMessage['content'];
const toContent = (value: unknown): Content =>
  typeof value === 'string' || kit.isContentBlocks(value)
    ? (value as Content)
    : (JSON.stringify(value) ?? '');

/**
 * The tool, made idempotent (the kit's `wrapToolInstance`: same class, the note, the repeat
 * argument in the schema LangChain parses the input with and binds for the model) with a `_call`
 * that runs the original once per turn + arguments (the kit's pipeline). Developer errors are
 * thrown, after `onRefusal` heard of them; the model's become an error ToolMessage.
 */
export function wrapTool<T extends ToolLike>(
  tool: T,
  adapter: kit.Adapter<CallContext>,
  caller: string,
  onRefusal?: (toolCallId: string, error: unknown) => void,
): T {
  const toolName = tool.name;
  const original = tool as unknown as Callable;
  const pair = original.responseFormat === 'content_and_artifact';
  const reply = (id: string, content: Content, receipt: kit.CallReceipt, artifact?: unknown) =>
    new ToolMessage({
      status: receipt.outcome === 'error' ? 'error' : 'success',
      content,
      artifact,
      tool_call_id: id,
      name: toolName,
      metadata: { ...original.metadata, idempotency: receipt },
    });

  const call: Call = async (input, runManager, parent) => {
    const config = (parent ?? {}) as ToolRunnableConfig & { state?: unknown };
    const scratch = config.configurable?.__pregel_scratchpad as { currentTaskInput?: unknown };
    const state = (config.state ?? scratch?.currentTaskInput) as CallContext['state'];
    const { toolCall } = config;
    const id = toolCall?.id; // as `call` decides whether to answer with a ToolMessage
    const execute = async (args: unknown, exec: ExecutionContext) => {
      const out = original._call.call(tool, args, runManager, {
        ...config,
        signal: kit.mergeSignals(config.signal, exec.signal),
        configurable: { ...config.configurable, [KEY_FIELD]: exec.key },
      });
      return kit.drain(await out, (part) => runManager?.handleToolEvent?.(part), 'return');
    };
    const info = (args: unknown) => ({ toolName, args, toolCall, state, config });
    // `input`: parsed by the tool's schema.
    const outcome = await kit.runWithReceipt(
      adapter,
      { toolName, input, parsed: true, info },
      execute,
    );
    if ('developer' in outcome && id) onRefusal?.(id, outcome.developer);
    if ('text' in outcome)
      return id ? reply(id, outcome.text, outcome.receipt) : kit.orThrow(outcome);
    if (!('output' in outcome)) return kit.orThrow(outcome);
    const { output: value, receipt, fresh } = outcome;
    // The store hands back a JSON round trip, no longer a ToolMessage or Command.
    if (fresh !== undefined && isDirectToolOutput(fresh.value)) return fresh.value;
    if (pair && !(Array.isArray(value) && value.length === 2)) return value;
    const [content, artifact] = pair ? (value as unknown[]) : [value];
    const marked = kit.markOutput(content, receipt.replayed, adapter.markFresh);
    if (!id) return marked; // as `call` does without a tool call: the content only
    return reply(id, toContent(marked), receipt, artifact);
  };
  // `call` passes our finished ToolMessage on in the `content` response format only.
  const spec = { caller, load, method: '_call', fields: { responseFormat: 'content' } };
  return kit.wrapToolInstance(tool, adapter as kit.Adapter<never>, spec, call);
}
