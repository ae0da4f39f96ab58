import { ConfigurationError } from '@idempotent-tools/core';
import { createAdapter } from '@idempotent-tools/core/adapter-kit';
import { turnSourcesOf } from './identity.js';
import type {
  CallContext,
  IdempotentToolOptions,
  IdempotentToolsOptions,
  ToolLike,
} from './types.js';
import { checkTool, wrapTool } from './wrap-tool.js';

/** The adapter of a set of tools known now (options, policies and names checked here). */
function adapterOf(tools: readonly unknown[], options: object, caller: string) {
  for (const tool of tools) checkTool(tool, caller);
  const toolNames = tools.map((tool) => (tool as ToolLike).name);
  return createAdapter<CallContext>(options as never, {
    caller,
    toolNames,
    // Tools wrapped on their own may run in any graph (one that ends after its tool node, too):
    // a run that ended with a tool result is not told from a broken one.
    ...turnSourcesOf(),
    repeatable: true,
  });
}

/**
 * One tool, made idempotent: a tool of the same kind (same class, name and schema) whose
 * description carries the retry note and which runs once per turn + arguments; a repeat
 * returns the stored outcome marked `replayed: true`. The turn comes from the graph's
 * `configurable.thread_id` and messages, or `configurable.turn_id`, or the options.
 *
 * ```ts
 * const createTicket = idempotentTool(tool(create, { name: 'create_ticket', schema }), { store });
 * ```
 * @throws ConfigurationError on bad options, and for a tool that is already idempotent (it came
 *   out of a wrapper: its call would wait for itself)
 */
export function idempotentTool<T extends ToolLike>(tool: T, options: IdempotentToolOptions<T>): T {
  const { policy, unsafe, ...rest } = (options ?? {}) as IdempotentToolOptions<T>;
  const name = (tool as Partial<ToolLike> | null)?.name as string;
  const adapter = adapterOf(
    [tool],
    {
      ...rest,
      ...(policy === undefined ? {} : { policies: { [name]: policy } }),
      ...(unsafe === true ? { unsafe: [name] } : {}),
    },
    'idempotentTool',
  );
  return wrapTool(tool, adapter, 'idempotentTool');
}

/**
 * Several tools, made idempotent (see `idempotentTool`); `exclude`d tools are returned as they
 * are, `unsafe` ones only get the not-safe-to-retry note. Names in `policies`, `exclude` and
 * `unsafe` must be names of the given tools.
 */
export function idempotentTools<T extends readonly ToolLike[]>(
  tools: T,
  options: IdempotentToolsOptions<T>,
): T {
  const caller = 'idempotentTools';
  if (!Array.isArray(tools)) {
    throw new ConfigurationError({
      option: 'tools',
      message: `${caller} takes an array of tools.`,
    });
  }
  const adapter = adapterOf(tools, options, caller);
  return tools.map((tool) => wrapTool(tool, adapter, caller)) as unknown as T;
}
