/** The adapter's public types: options, what resolver functions are given, tool metadata. */
import type { ToolPolicy } from '@idempotent-tools/core';
import type * as kit from '@idempotent-tools/core/adapter-kit';
import type { ToolCall } from '@langchain/core/messages';
import type { StructuredToolInterface, ToolRunnableConfig } from '@langchain/core/tools';
import type { InferInteropZodOutput, InteropZodType } from '@langchain/core/utils/types';

/** What a `turnId`, `conversationId` or `scope` function is given about one tool call. */
export interface CallContext {
  toolName: string;
  /** The arguments, as parsed by the tool's schema. */
  args: unknown;
  /** The model's tool call (`id`, `name`, `args`), when the tool was called with one. */
  toolCall: ToolCall | undefined;
  /** The graph state the tool runs in (`messages`, ...), when a tool node runs it. */
  state: Record<string, unknown> | undefined;
  /** The call's config: `configurable` (`thread_id`, `turn_id`), `context`, `metadata`, ... */
  config: ToolRunnableConfig;
}

/** How calls are identified and marked, shared by every entry point (see the kit's docs). */
export type WrapOptions = kit.ToolWrapOptions<CallContext>;

/** A LangChain tool as the wrappers take it at compile time (checked fully at run time). */
export interface ToolLike {
  name: string;
  description: string;
  lc_namespace: string[];
}

/** The arguments of a tool, after its schema parsed them. */
export type ToolArgs<T> =
  T extends StructuredToolInterface<infer S>
    ? S extends InteropZodType
      ? InferInteropZodOutput<S>
      : unknown
    : unknown;

/**
 * What `ToolMessage.metadata.idempotency` holds for code (the model reads the content): `key`,
 * `replayed`, `outcome` (`executed`, `replayed`, `waited`, `reconciled`, or `error`: an
 * idempotency error, whose code is `error`).
 */
export type IdempotencyMetadata = kit.CallReceipt;

type ByName<T extends readonly ToolLike[]> = { [K in T[number] as K['name']]: K };

/** Options of `idempotentTool(tool, options)` (`unsafe`: every call runs, with the note). */
export type IdempotentToolOptions<T = ToolLike> = kit.OneToolWrapperOptions<
  CallContext,
  ToolPolicy<ToolArgs<T>>
>;

/** Options of `idempotentTools(tools, options)`: names and argument types come from the tools. */
export type IdempotentToolsOptions<T extends readonly ToolLike[] = readonly ToolLike[]> =
  kit.ToolSetWrapperOptions<
    CallContext,
    T[number]['name'],
    { [N in keyof ByName<T>]: ToolPolicy<ToolArgs<ByName<T>[N]>> }
  >;

/** Options of `idempotentToolsMiddleware(options)`: the tools are not known in advance. */
export type IdempotentToolsMiddlewareOptions = kit.ToolSetWrapperOptions<
  CallContext,
  string,
  Record<string, ToolPolicy<Record<string, unknown>>>
>;
