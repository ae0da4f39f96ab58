import * as kit from '@idempotent-tools/core/adapter-kit';
import { isStructuredTool, type StructuredToolInterface } from '@langchain/core/tools';
import { createMiddleware } from 'langchain';
import { toolsSeen, turnSourcesOf } from './identity.js';
import type { CallContext, IdempotentToolsMiddlewareOptions } from './types.js';
import { wrapTool } from './wrap-tool.js';

/** The fields of a plain tool definition (what the model is shown of a wrapped tool). */
const PLAIN = ['name', 'description', 'schema', 'extras', 'metadata'] as const;

const canWrap = (tool: unknown): tool is StructuredToolInterface => {
  const t = tool as (StructuredToolInterface & { _call?: unknown }) | undefined;
  return isStructuredTool(t) && typeof t._call === 'function' && typeof t.name === 'string';
};

/**
 * A `createAgent` middleware that makes every tool of the agent idempotent without touching the
 * tools: the model sees each description with the retry note, the tool node runs an idempotent
 * copy (see `idempotentTool`). Works with `toolRetryMiddleware` in either order; list it after
 * middleware that supplies tools. Needs `langchain` >= 1.2.13. A run with nothing that tells its
 * conversation apart is refused before the model is called, and so is a tool that is already
 * idempotent (unless excluded): `agent.invoke` throws a `ConfigurationError`; developer errors of
 * a tool end the run. It learns the agent's tools from the model calls: a run that ended on a
 * `returnDirect` tool's result answered its turn, one that ended on another's broke.
 *
 * ```ts
 * const agent = createAgent({ model, tools, middleware: [idempotentToolsMiddleware({ store })] });
 * await agent.invoke({ messages }, { configurable: { thread_id: chatId } });
 * ```
 */
export function idempotentToolsMiddleware(options: IdempotentToolsMiddlewareOptions) {
  const caller = 'idempotentToolsMiddleware';
  const tools = toolsSeen();
  const sources = turnSourcesOf(tools.endsRun);
  const adapter = kit.createAdapter<CallContext>(options as never, {
    caller,
    ...sources,
    repeatable: true,
  });
  /** Developer errors of tool calls in flight (a middleware below may eat them). */
  const refusals = kit.createHeldErrors();
  /** The tool as the agent should run it (a tool that is already idempotent is refused). */
  const guarded = kit.wrapEachOnce<StructuredToolInterface>(caller, (tool) =>
    wrapTool(tool, adapter, caller, refusals.hold),
  );

  return createMiddleware({
    name: 'IdempotentToolsMiddleware',
    // No identity at all: refused here, where no other middleware can turn it into a message.
    beforeAgent: (_state, runtime) => {
      const config = { configurable: runtime.configurable ?? {} };
      const call = { toolName: '', args: undefined, toolCall: undefined, state: undefined, config };
      kit.refuseUnidentified(adapter, options, sources, call);
    },
    // The agent rejects a replaced tool instance, so the model gets a plain tool definition
    // (same name and schema, the note in the description); the tool node runs the wrapped tool.
    wrapModelCall: (request, handler) =>
      handler({
        ...request,
        tools: (request.tools ?? []).map((tool) => {
          tools.learn(tool);
          const out = canWrap(tool) ? guarded(tool) : tool;
          return out === tool ? tool : (kit.plainDefinition(out, PLAIN) as typeof tool);
        }),
      }),
    // A developer error of the tool ends the run, even when a middleware below us (e.g.
    // toolRetryMiddleware's onFailure: 'continue') made a message of it.
    wrapToolCall: async (request, handler) => {
      const { tool } = request;
      tools.learn(tool);
      if (!canWrap(tool)) return handler(request);
      return refusals.around(request.toolCall.id, () =>
        handler({ ...request, tool: guarded(tool) }),
      );
    },
  });
}
