/** The adapter's public types: options, what resolver functions are given, tool metadata. */
import type { ExecutorOptions, IdempotentResult, ToolPolicy } from '@idempotent-tools/core';
import type { PerCall, RepeatablePolicy } from '@idempotent-tools/core/adapter-kit';
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

export type { ExecutorOptions };

/** How calls are identified and marked; shared by every entry point. */
export interface WrapOptions {
  /**
   * The turn: your id of the user turn (e.g. the id your app stores the user message under),
   * unique across conversations. A string, or a function of the call (undefined: the next
   * source). Wins over every other source. Never the tool-call id: it is new on every retry.
   * @default undefined (`configurable.turn_id`, else derived from the thread and its messages)
   */
  turnId?: PerCall<CallContext> | undefined;
  /**
   * The conversation (your chat id), when it is not the graph's `configurable.thread_id`. With
   * it the turn is derived from the state's messages: which user turn it is and what the user
   * wrote. A string means every call through these tools is that one conversation.
   * @default undefined (`configurable.thread_id`)
   */
  conversationId?: PerCall<CallContext> | undefined;
  /**
   * Tenant / user: records of one scope are never replayed in another. Not a conversation
   * identity (two chats of one user share a scope).
   * @default undefined (one global scope)
   */
  scope?: PerCall<CallContext> | undefined;
  /**
   * Also mark fresh results in the content the model reads (`replayed: false`).
   * @default false
   */
  markFresh?: boolean | undefined;
}

/**
 * A LangChain tool, as the wrappers accept it at compile time (`tool()`, `StructuredTool`,
 * `DynamicStructuredTool`, `DynamicTool`); checked fully at run time.
 */
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

/** What `ToolMessage.metadata.idempotency` holds for code (the model reads the content). */
export interface IdempotencyMetadata {
  key: string | undefined;
  /** True when the tool did not run for this call: the content is the stored outcome. */
  replayed: boolean;
  /** `executed`, `replayed`, `waited`, `reconciled`, or `error` (an idempotency error). */
  outcome: IdempotentResult<unknown>['outcome'] | 'error';
  /** The idempotency error's code, when `outcome` is `error`. */
  error?: string;
}

/** The tools of a list, by name. */
type ByName<T extends readonly ToolLike[]> = { [K in T[number] as K['name']]: K };

/** Options of `idempotentTool(tool, options)`. */
export type IdempotentToolOptions<T = ToolLike> = ExecutorOptions &
  WrapOptions & {
    /**
     * The tool's policy: `ttl`, `lease`, `businessKey`, `reconcile`, `onStale`, `isTerminalError`...
     * and `repeatable` (deliberate repeats: the schema gets the `repeat` argument, see the README).
     * @default {} (the executor's defaults)
     */
    policy?: ToolPolicy<ToolArgs<T>> & RepeatablePolicy;
    /**
     * Leave the tool unguarded (every call runs) and add the "not safe to retry" note.
     * @default false
     */
    unsafe?: boolean;
  };

/** Options of `idempotentTools(tools, options)`: names and argument types come from the tools. */
export type IdempotentToolsOptions<T extends readonly ToolLike[] = readonly ToolLike[]> =
  ExecutorOptions &
    WrapOptions & {
      /**
       * Per-tool policy, by tool name: `ttl`, `lease`, `businessKey`, `reconcile`, `onStale`,
       * `isTerminalError`..., `repeatable` (deliberate repeats).
       * @default {} (the executor's defaults for every tool)
       */
      policies?: {
        [N in keyof ByName<T>]?: ToolPolicy<ToolArgs<ByName<T>[N]>> & RepeatablePolicy;
      };
      /**
       * Tools left exactly as they are (read-only tools: look-ups), by name.
       * @default []
       */
      exclude?: ReadonlyArray<T[number]['name']>;
      /**
       * Tools not made idempotent, by name: every call runs again, and their description tells
       * the model they are not safe to retry.
       * @default []
       */
      unsafe?: ReadonlyArray<T[number]['name']>;
    };

/** Options of `idempotentToolsMiddleware(options)`: the tools are not known in advance. */
export type IdempotentToolsMiddlewareOptions = ExecutorOptions &
  WrapOptions & {
    /** Per-tool policy, by tool name (see `idempotentTools`). @default {} */
    policies?: Readonly<Record<string, ToolPolicy<Record<string, unknown>> & RepeatablePolicy>>;
    /** Tools left exactly as they are (read-only tools), by name. @default [] */
    exclude?: readonly string[];
    /** Tools not made idempotent, with the "not safe to retry" note, by name. @default [] */
    unsafe?: readonly string[];
  };
