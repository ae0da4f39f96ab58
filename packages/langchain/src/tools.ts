import * as kit from '@idempotent-tools/core/adapter-kit';
import { turnSourcesOf } from './identity.js';
import type {
  CallContext,
  IdempotentToolOptions,
  IdempotentToolsOptions,
  ToolLike,
} from './types.js';
import { TOOLS, wrapTool } from './wrap-tool.js';

/** The tools, wrapped (options, policies and names checked first). */
function wrapAll<T extends readonly ToolLike[]>(tools: T, options: unknown, caller: string): T {
  const adapter = kit.createInstanceAdapter<CallContext>(tools, options, {
    ...TOOLS,
    caller,
    // Tools wrapped on their own may run in any graph (one that ends after its tool node, too):
    // a run that ended with a tool result is not told from a broken one.
    ...turnSourcesOf(),
    repeatable: true,
  });
  return tools.map((tool) => wrapTool(tool, adapter, caller)) as unknown as T;
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
  const name = (tool as Partial<ToolLike> | null)?.name as string;
  return wrapAll([tool], kit.oneToolOptions(name, options), 'idempotentTool')[0] as T;
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
  return wrapAll(tools, options, 'idempotentTools');
}
