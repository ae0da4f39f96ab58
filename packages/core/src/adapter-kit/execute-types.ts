/**
 * The option types of wrappers of tools that have an `execute(input, options)` (the AI SDK's,
 * Mastra's): each tool's policy typed with its input and its output.
 */
import type { ToolPolicy } from '../executor/types.js';
import type { OneToolWrapperOptions, ToolSetWrapperOptions } from './tool-set.js';

/** The policy type of a tool: its input and (final: an async iterable's last part) output types. */
export type ExecutePolicyOf<T> = T extends {
  execute?: ((input: infer I, options: never) => infer R) | undefined;
}
  ? ToolPolicy<I, R extends AsyncIterable<infer O> ? O : Awaited<R>>
  : ToolPolicy;

/** All the options of a tool record's wrapper, each tool's policy typed (`ExecutePolicyOf`). */
export type ExecuteToolSetOptions<Info, TOOLS> = ToolSetWrapperOptions<
  Info,
  keyof TOOLS & string,
  { [K in keyof TOOLS]: ExecutePolicyOf<TOOLS[K]> }
>;

/** All the options of a one-tool wrapper, the tool's policy typed (`ExecutePolicyOf`). */
export type ExecuteToolOptions<Info, TOOL> = OneToolWrapperOptions<Info, ExecutePolicyOf<TOOL>>;
