import {
  ConfigurationError,
  type ExecutionContext,
  type ExecutorOptions,
} from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import { approvalSpec, askOf, type McpToolPolicy, watchCapabilities } from './approval.js';
import type { ToolCallInfo, ToolExtra } from './sdk.js';
import { callbacksOf, callInfo, entryField, type McpServerLike, withSignal } from './sdk.js';

/** A `CallToolResult` of either SDK, as far as the adapter reads it. */
export type { ContentResult as CallToolResult } from '@idempotent-tools/core/adapter-kit';
/** An `isError: true` result of a tool: not stored (a retry runs again) unless `isTerminalError`. */
export { ToolResultError } from '@idempotent-tools/core/adapter-kit';
export {
  APPROVAL_INPUT_PREFIX,
  type McpApprovalOption,
  type McpApprovalPolicy,
  type McpToolPolicy,
} from './approval.js';
export type { McpServerLike, ToolCallInfo, ToolExtra } from './sdk.js';

/** `_meta` field of a `tools/call` request: the client's idempotency key for this one call. */
export const IDEMPOTENCY_KEY_META = 'io.idempotent-tools/key';
/** `_meta` field of a `tools/call` request: the client's id of the user turn. */
export const TURN_ID_META = 'io.idempotent-tools/turn-id';
/** `_meta` field of a `CallToolResult`: `true` on a replay (`false` on a fresh one with `markFresh`). */
export const REPLAYED_META = 'io.idempotent-tools/replayed';
/** Default `sessionWindow`: 5 minutes (the content-based deduplication window of SQS FIFO queues). */
export const DEFAULT_SESSION_WINDOW = kit.DEFAULT_SESSION_WINDOW;

/** A per-call value: fixed, or computed from the call (undefined: not known). */
export type PerCall = kit.PerCall<ToolCallInfo>;

/** Options of `idempotentServer(server, options)` and `idempotentRegisterTool(server, options)`. */
export type IdempotentServerOptions = ExecutorOptions &
  Omit<kit.AdapterOptions<ToolCallInfo, McpToolPolicy>, 'conversationId'> &
  kit.ClientTurnOptions & {
    /** Also wrap tools annotated `readOnlyHint: true` (left as they are by default). @default false */
    wrapReadOnly?: boolean;
  };

type Handler = (...params: unknown[]) => unknown;
const CALLER = 'idempotentServer';
const HOW_TO = `_meta["${TURN_ID_META}"] on tools/call (the client's id of the user turn, new for every user message and the same on a retry, e.g. the message id), or the server's turnId option`;
/** MCP's own options, and those that can never work on MCP (and why), for `optionChecks`. */
const OPTION_CHECKS: Record<string, (value: unknown) => string | undefined> = {
  noSessionTurnId: () =>
    `noSessionTurnId is gone: it gave every client without a session one shared turn, so one client's call replayed another's. Have clients send ${HOW_TO}.`,
  conversationId: () =>
    `an MCP server never sees the conversation's messages, so conversationId cannot tell its turns apart. Use ${HOW_TO}.`,
  sessionWindow: kit.checkSessionWindow,
  wrapReadOnly: (value) =>
    typeof value === 'boolean' ? undefined : 'wrapReadOnly must be true or false.',
};
const contexts = kit.createContextRegistry();
const require = kit.requireNear(import.meta.url);

/**
 * The idempotency context of a wrapped call, from the `extra` (1.x) / `ctx` (2.x) your callback
 * received: `key` (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(extra: object): ExecutionContext | undefined {
  return contexts.get(extra);
}

/** Check the options and make the adapter; returns what wraps one registered tool. */
function prepare(server: McpServerLike, options: IdempotentServerOptions) {
  const refuse = (why: string) =>
    new ConfigurationError({ option: 'server', message: `${CALLER}: ${why}` });
  if (typeof server?.registerTool !== 'function') {
    throw refuse(
      'pass an McpServer (new McpServer(...) from @modelcontextprotocol/server or @modelcontextprotocol/sdk/server/mcp.js).',
    );
  }
  if (kit.isWrapped(server)) {
    throw refuse(
      'this server is already made idempotent: give per-tool options in its policies, exclude and unsafe.',
    );
  }
  const o = (options ?? {}) as Record<string, unknown>;
  const ttl = typeof o.ttl === 'number' ? o.ttl : undefined; // never with { idempotency }
  const window = (o.sessionWindow ?? DEFAULT_SESSION_WINDOW) as number | false;
  // The turn the client gave: its key, its turn id, its task, else its session (scoped by client).
  const clients = kit.createClientTurns<ToolCallInfo>({
    ...{ window, ttl, keyField: IDEMPOTENCY_KEY_META, turnField: TURN_ID_META },
    label: (field) => `_meta["${field}"]`,
    meta: (call) => call.meta,
    task: (call) =>
      (call.meta?.['io.modelcontextprotocol/related-task'] as { taskId?: unknown })?.taskId,
    session: (call) => call.sessionId,
    who: (call) => [call.authInfo?.clientId, call.clientName],
  });
  const spec = { caller: CALLER, optionChecks: OPTION_CHECKS, repeatable: true, howTo: HOW_TO };
  const { adapter, approvals, approval, asking } = kit.createAskingAdapter<ToolCallInfo>(
    o,
    { ...spec, turn: clients.turn },
    approvalSpec,
  );
  if (asking.length > 0) watchCapabilities(server, asking, CALLER);

  /** The wrapped callback of one tool: its own (`raw`) run through the pipeline. */
  const wrappedOf = (raw: kit.OwnTool<kit.ToolEntry>, tool: kit.ToolEntry) => {
    const mark = (value: unknown, replayed: boolean) =>
      kit.markContentResult(value as kit.ContentResult, replayed, {
        ...{ markFresh: adapter.markFresh, metaField: REPLAYED_META },
        declared: kit.declaresReplayed(tool.outputSchema),
      });
    return async (...params: unknown[]) => {
      const extra = params[params.length - 1] as ToolExtra;
      const input = (params.length > 1 ? params[0] : undefined) ?? {};
      const info = (args: unknown) => callInfo(raw.name, args as never, extra, server);
      // A tool without arguments whose schema only the repeat argument made is still called so.
      const hasArgs =
        params.length > 1 && (!adapter.repeats(raw.name) || raw.inputSchema !== undefined);
      const execute = async (args: unknown, context: ExecutionContext) => {
        const inner = withSignal(extra, context.signal);
        contexts.set(inner, context);
        const handler = raw.handler as Handler;
        const output = (await handler(...(hasArgs ? [args, inner] : [inner]))) as kit.ContentResult;
        // A 2026-07-28 `input_required` round is never the outcome: the claim is released.
        if (output?.resultType === 'input_required') throw new kit.NotAnOutcome(output);
        return kit.contentOutcome(output);
      };
      const given = { toolName: raw.name, input, parsed: true, info, policy: clients.policy };
      const ask = (call: ToolCallInfo) => askOf(approval(raw.name), server, call);
      const run = kit.runAskingCall(adapter, approvals, given, execute, ask, mark);
      return kit.contentReply(await run);
    };
  };

  /** Make one registered tool idempotent (or mark it unsafe), now and after `update(...)`. */
  return (name: unknown, tool: kit.ToolEntry) => {
    if (typeof name !== 'string' || tool === null || typeof tool !== 'object') return;
    const field = entryField(tool);
    kit.wrapEntry(name, tool, {
      ...{ adapter: adapter as kit.Adapter<never>, caller: CALLER, field, callbacks: callbacksOf },
      ...{ schemaUpdate: 'paramsSchema', wrapReadOnly: o.wrapReadOnly === true },
      asks: (tool) => approval(tool) !== undefined,
      wrapped: (raw) => wrappedOf(raw, tool),
      schema: (present, own) =>
        field === 'executor' ? present.standardSchema(own) : present.zodSchema(own, require),
      // 2.x memoises the JSON of a tool's input schema: forget it once the schema changed.
      changed: (name) => {
        delete (server as { _toolInputSchemaJson?: Record<string, unknown> })
          ._toolInputSchemaJson?.[name];
      },
    });
  };
}

/**
 * Make every tool of an MCP server (`@modelcontextprotocol/sdk` 1.x or
 * `@modelcontextprotocol/server` 2.x) idempotent, those registered already and later: a retried
 * `tools/call` of the same turn replays the stored `CallToolResult`, marked replayed; a call that
 * nothing identifies is refused with an `isError` result saying what the client must send.
 * Returns the same server. See the README.
 * @throws ConfigurationError for options that can never work (when the server is wrapped)
 */
export function idempotentServer<S extends McpServerLike>(
  server: S,
  options: IdempotentServerOptions,
): S {
  const wrap = prepare(server, options);
  const tools = (server as { _registeredTools?: object })._registeredTools ?? {};
  const registered = Object.entries(tools) as [string, kit.ToolEntry][];
  const methods = ['registerTool', 'tool'];
  return kit.wrapRegistry(
    server,
    { caller: CALLER, methods, registered, callbacks: callbacksOf },
    wrap,
  );
}

/**
 * A `registerTool` for `server` whose tools are idempotent; `server.registerTool` itself is left
 * as it is (for tools you do not want wrapped). Same options as `idempotentServer`.
 */
export function idempotentRegisterTool<S extends McpServerLike>(
  server: S,
  options: IdempotentServerOptions,
): S['registerTool'] {
  const wrap = prepare(server, options);
  return kit.registering(server, server.registerTool as never, wrap) as S['registerTool'];
}
