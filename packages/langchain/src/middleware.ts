import { checkToolName, createAdapter } from '@idempotent-tools/core/adapter-kit';
import { isStructuredTool, type StructuredToolInterface } from '@langchain/core/tools';
import { createMiddleware } from 'langchain';
import { type ReturnsDirect, turnSourcesOf } from './identity.js';
import type { CallContext, IdempotentToolsMiddlewareOptions } from './types.js';
import { wrapTool } from './wrap-tool.js';

const canWrap = (tool: unknown): tool is StructuredToolInterface => {
  const t = tool as (StructuredToolInterface & { _call?: unknown }) | undefined;
  return isStructuredTool(t) && typeof t._call === 'function' && typeof t.name === 'string';
};

/**
 * A `createAgent` middleware that makes every tool of the agent idempotent without touching the
 * tools: the model sees each tool's description with the retry note, and the tool node runs an
 * idempotent copy of the tool (see `idempotentTool`). Works with `toolRetryMiddleware` in either
 * order: every retry of the handler meets the stored outcome. List it after middleware that
 * supplies tools (`request.tool`). Needs `langchain` >= 1.2.13.
 *
 * A run with nothing that tells its conversation apart (no `configurable.thread_id` or
 * `turn_id`, no `conversationId` or `turnId` option) is refused before the model is called:
 * `agent.invoke` throws a `ConfigurationError`. LangChain's tool node would turn an error thrown
 * by a tool into a message for the model; the middleware makes such errors end the run. A tool
 * that is already idempotent (from `idempotentTools`) is refused before the first model call,
 * unless it is in `exclude`. The middleware learns the agent's tools from the model calls it
 * wraps: a run that ended on a `returnDirect` tool's result answered its turn; one that ended on
 * another tool's result broke (see `deriveTurnId`).
 *
 * ```ts
 * const agent = createAgent({ model, tools, middleware: [idempotentToolsMiddleware({ store })] });
 * await agent.invoke({ messages }, { configurable: { thread_id: chatId } });
 * ```
 */
export function idempotentToolsMiddleware(options: IdempotentToolsMiddlewareOptions) {
  const caller = 'idempotentToolsMiddleware';
  /** The agent's tools seen so far, by name: whether a result of theirs ends the run. */
  const direct = new Map<string, boolean | 'both'>();
  const learn = (tool: unknown) => {
    const { name, returnDirect } = (tool ?? {}) as { name?: unknown; returnDirect?: unknown };
    if (typeof name !== 'string') return;
    const now = returnDirect === true;
    const known = direct.get(name);
    direct.set(name, known === undefined || known === now ? now : 'both');
  };
  const returnsDirect: ReturnsDirect = (name) => {
    const known = direct.get(name);
    return known === 'both' ? undefined : known;
  };
  const turnSources = turnSourcesOf(returnsDirect);
  const adapter = createAdapter<CallContext>(options as never, {
    caller,
    ...turnSources,
    repeatable: true,
  });
  const fixed = options.turnId !== undefined || options.conversationId !== undefined;
  /** Developer errors of tool calls in flight, by tool-call id (a middleware below may eat them). */
  const refusals = new Map<string, unknown>();
  const onRefusal = (id: string, error: unknown) => void refusals.set(id, error);
  const cache = new WeakMap<StructuredToolInterface, StructuredToolInterface>();
  /**
   * The tool as the agent should run it (excluded tools: unchanged). A tool that is already
   * idempotent (made by `idempotentTools`, say) is refused: its call would wait for itself.
   */
  const guarded = (tool: StructuredToolInterface): StructuredToolInterface => {
    let out = cache.get(tool);
    if (out === undefined) {
      checkToolName(tool.name, caller);
      out = wrapTool(tool, adapter, caller, onRefusal);
      cache.set(tool, out);
    }
    return out;
  };

  return createMiddleware({
    name: 'IdempotentToolsMiddleware',
    // No identity at all: refused here, where no other middleware can turn it into a message.
    beforeAgent: (_state, runtime) => {
      const call = {
        toolName: '',
        args: undefined,
        toolCall: undefined,
        state: undefined,
        config: { configurable: runtime.configurable ?? {} },
      };
      if (fixed || turnSources.turn?.(call) || turnSources.conversation?.(call)) return;
      adapter.identify(call, ''); // throws the ConfigurationError that names what to pass
    },
    // The agent rejects a replaced tool instance, so the model gets a plain tool definition
    // (same name and schema, the note in the description); the tool node runs the wrapped tool.
    wrapModelCall: (request, handler) =>
      handler({
        ...request,
        tools: (request.tools ?? []).map((tool) => {
          learn(tool);
          if (!canWrap(tool)) return tool;
          const out = guarded(tool);
          if (out === tool) return tool;
          const { extras, metadata } = out as { extras?: object; metadata?: object };
          return {
            name: out.name,
            description: out.description,
            schema: out.schema,
            ...(extras === undefined ? {} : { extras }),
            ...(metadata === undefined ? {} : { metadata }),
          };
        }),
      }),
    // A developer error of the tool ends the run, even when a middleware below us (e.g.
    // toolRetryMiddleware's onFailure: 'continue') made a message of it.
    wrapToolCall: async (request, handler) => {
      learn(request.tool);
      if (!canWrap(request.tool)) return handler(request);
      const id = request.toolCall.id;
      if (!id) return handler({ ...request, tool: guarded(request.tool) });
      try {
        const out = await handler({ ...request, tool: guarded(request.tool) });
        if (refusals.has(id)) throw refusals.get(id);
        return out;
      } finally {
        refusals.delete(id);
      }
    },
  });
}
