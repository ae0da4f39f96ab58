import { isStructuredTool, type StructuredToolInterface } from '@langchain/core/tools';
import { createMiddleware } from 'langchain';
import { type IdempotentToolsMiddlewareOptions, planOf } from './tools.js';
import { executorOf, isIdempotentTool, wrapTool } from './wrap-tool.js';

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
 * ```ts
 * const agent = createAgent({ model, tools, middleware: [idempotentToolsMiddleware({ store })] });
 * ```
 */
export function idempotentToolsMiddleware(options: IdempotentToolsMiddlewareOptions) {
  const caller = 'idempotentToolsMiddleware';
  const idempotency = executorOf(options, caller);
  const plan = planOf(options, caller);
  const cache = new WeakMap<StructuredToolInterface, StructuredToolInterface>();
  /** The tool as the agent should run it (read-only and already wrapped tools: unchanged). */
  const guarded = (tool: StructuredToolInterface): StructuredToolInterface => {
    let out = cache.get(tool);
    if (out === undefined) {
      const how = plan(tool.name);
      out =
        how === 'exclude' || isIdempotentTool(tool)
          ? tool
          : wrapTool(tool, idempotency, options, how === 'unsafe' ? { unsafe: true } : how);
      cache.set(tool, out);
    }
    return out;
  };

  return createMiddleware({
    name: 'IdempotentToolsMiddleware',
    // The agent rejects a replaced tool instance, so the model gets a plain tool definition
    // (same name and schema, the note in the description); the tool node runs the wrapped tool.
    wrapModelCall: (request, handler) =>
      handler({
        ...request,
        tools: (request.tools ?? []).map((tool) => {
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
    wrapToolCall: (request, handler) =>
      canWrap(request.tool)
        ? handler({ ...request, tool: guarded(request.tool) })
        : handler(request),
  });
}
