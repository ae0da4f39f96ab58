import {
  type ExecutionContext,
  type ExecutorOptions,
  errorForModel,
  executorFrom,
  type Idempotency,
  InvalidInputError,
  markReplayed,
  type ToolPolicy,
  withRetryNote,
} from '@idempotent-tools/core';
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type {
  CallToolResult,
  ServerNotification,
  ServerRequest,
  ToolAnnotations,
} from '@modelcontextprotocol/sdk/types.js';

/** `_meta` field of a `tools/call` request: the client's idempotency key for this one call. */
export const IDEMPOTENCY_KEY_META = 'io.idempotent-tools/key';
/** `_meta` field of a `tools/call` request: the client's conversation turn id. */
export const TURN_ID_META = 'io.idempotent-tools/turn-id';
/** `_meta` field of a `CallToolResult`: `true` on a replay (`false` on a fresh result with `markFresh`). */
export const REPLAYED_META = 'io.idempotent-tools/replayed';

/** What the SDK hands a tool callback besides its arguments. */
export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** One `tools/call`: what `turnId` and `scope` functions are given. */
export interface ToolCallInfo {
  toolName: string;
  /** The arguments, as parsed by the tool's `inputSchema` (`{}` for a tool without one). */
  args: Record<string, unknown>;
  /** The SDK's `extra`: `sessionId`, `authInfo`, `_meta`, `requestInfo`, `signal`, ... */
  extra: ToolExtra;
}

/** A per-call value: fixed, or computed from the call (undefined: use the default). */
export type PerCall = string | ((call: ToolCallInfo) => string | undefined);

/** The policy of one MCP tool: its outcome is the tool's `CallToolResult`. */
export type McpToolPolicy = ToolPolicy<Record<string, unknown>, CallToolResult>;

/** Options of `idempotentServer(server, options)` and `idempotentRegisterTool(server, options)`. */
export type IdempotentServerOptions = ExecutorOptions & {
  /**
   * The turn part of the key: a string, or a function of the call; undefined falls back to the
   * default: `_meta["io.idempotent-tools/turn-id"]` of the request, else the session id
   * (`extra.sessionId`), else `noSessionTurnId`. Never the JSON-RPC request id.
   * @default derived as above
   */
  turnId?: PerCall;
  /**
   * The turn id of calls with no session (stdio, in-memory, stateless HTTP) and no turn id in
   * `_meta`: every such call of one scope shares it, for the TTL.
   * @default 'no-session'
   */
  noSessionTurnId?: string;
  /**
   * Tenant / user: records of one scope are invisible to another, e.g.
   * `({ extra }) => extra.authInfo?.clientId`.
   * @default undefined (one global scope)
   */
  scope?: PerCall;
  /**
   * Per-tool policy (ttl, lease, businessKey, onDrift, reconcile, onStale, isTerminalError...),
   * by tool name.
   * @default {} (the executor's defaults)
   */
  policies?: Record<string, McpToolPolicy>;
  /**
   * Tools left exactly as they are.
   * @default []
   */
  exclude?: readonly string[];
  /**
   * Tools not made idempotent: each call runs again; their description gets the "not safe to
   * retry" note and their annotations `idempotentHint: false`.
   * @default []
   */
  unsafe?: readonly string[];
  /**
   * Also wrap tools annotated `readOnlyHint: true` (left as they are by default).
   * @default false
   */
  wrapReadOnly?: boolean;
  /**
   * Also mark fresh results (`replayed: false`), not only replays.
   * @default false
   */
  markFresh?: boolean;
};

/**
 * An `isError: true` result of a tool: not stored (the claim is released, so a retry runs
 * again), unless `isTerminalError` says so; `isTerminalError` receives this error.
 */
export class ToolResultError extends Error {
  readonly result: CallToolResult;
  constructor(result: CallToolResult) {
    const text = (result.content ?? []).flatMap((part) =>
      part.type === 'text' ? [part.text] : [],
    );
    super(text.join('\n') || 'The tool returned an error result.');
    this.name = 'ToolResultError';
    this.result = result;
  }
}

type Handler = (...params: unknown[]) => unknown;
type Kind = 'wrap' | 'unsafe' | 'skip';

/** Inner `extra` objects -> the idempotency context of their call. */
const contexts = new WeakMap<object, ExecutionContext>();
/** Servers whose tools are all wrapped. */
const wrappedServers = new WeakSet<object>();

/**
 * The idempotency context of a wrapped call, from the `extra` your callback received: `key`
 * (send it on as the vendor's `Idempotency-Key`), `signal`, `turnId`, `scope`.
 * @returns undefined when the tool was not run through a wrapper
 */
export function idempotencyContext(extra: object): ExecutionContext | undefined {
  return contexts.get(extra);
}

function metaString(extra: ToolExtra, field: string): string | undefined {
  const value = (extra._meta as Record<string, unknown> | undefined)?.[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') {
    throw new InvalidInputError({
      field,
      message: `_meta["${field}"] must be a non-empty string, got ${JSON.stringify(value) ?? typeof value}. Send a unique id (e.g. a UUID), or leave the field out.`,
    });
  }
  return value;
}

function perCall(value: PerCall | undefined, info: ToolCallInfo): string | undefined {
  return typeof value === 'function' ? value(info) : value;
}

/** `replayed` in the structured content, where the output schema lets it in. */
function markStructured(
  structured: Record<string, unknown>,
  replayed: boolean,
  outputSchema: unknown,
): Record<string, unknown> {
  if (outputSchema === undefined) {
    return markReplayed(structured, replayed, { markFresh: true }) as Record<string, unknown>;
  }
  const schema = outputSchema as { shape?: unknown; _zod?: { def?: { shape?: unknown } } };
  const shape = schema._zod?.def?.shape ?? schema.shape;
  return shape !== null && typeof shape === 'object' && Object.hasOwn(shape, 'replayed')
    ? { ...structured, replayed }
    : structured;
}

function markResult(
  result: CallToolResult,
  replayed: boolean,
  outputSchema: unknown,
): CallToolResult {
  const marked: CallToolResult = {
    ...result,
    content: [...(result.content ?? []), { type: 'text', text: JSON.stringify({ replayed }) }],
    _meta: { ...result._meta, [REPLAYED_META]: replayed },
  };
  if (result.structuredContent !== undefined) {
    marked.structuredContent = markStructured(result.structuredContent, replayed, outputSchema);
  }
  return marked;
}

function forModel(error: unknown): CallToolResult {
  const shown = errorForModel(error);
  if (shown === undefined) throw error; // the tool's own error: the SDK reports it as usual
  return { content: [{ type: 'text', text: JSON.stringify(shown) }], isError: true };
}

/** Make one registered tool idempotent (or mark it unsafe), now and after `update(...)`. */
function wrapRegistered(
  registered: RegisteredTool,
  name: string,
  executor: Idempotency,
  options: IdempotentServerOptions,
  kindOf: (name: string, annotations: ToolAnnotations | undefined) => Kind,
): void {
  const tool = registered as unknown as Record<string, unknown>;
  // SDK >= 1.23 keeps the callback in `handler`, earlier versions in `callback`.
  const field = 'handler' in tool ? 'handler' : 'callback';
  const raw = {
    name,
    handler: tool[field],
    description: registered.description,
    annotations: registered.annotations,
  };
  const { markFresh = false } = options;

  const wrapped: Handler = async (...params) => {
    const extra = params[params.length - 1] as ToolExtra;
    const hasArgs = params.length > 1;
    const info: ToolCallInfo = {
      toolName: raw.name,
      args: (hasArgs ? params[0] : {}) as Record<string, unknown>,
      extra,
    };
    const handler = raw.handler as Handler;
    try {
      let policy = options.policies?.[raw.name];
      const clientKey = metaString(extra, IDEMPOTENCY_KEY_META);
      if (clientKey !== undefined && policy?.businessKey === undefined) {
        policy = { ...policy, businessKey: () => ['client-key', clientKey] };
      }
      const clientTurn = metaString(extra, TURN_ID_META);
      const turnId =
        perCall(options.turnId, info) ??
        (clientTurn !== undefined
          ? `turn:${clientTurn}`
          : extra.sessionId !== undefined
            ? `session:${extra.sessionId}`
            : (options.noSessionTurnId ?? 'no-session'));
      const call = {
        toolName: raw.name,
        turnId,
        scope: perCall(options.scope, info),
        args: info.args,
      };
      const result = await executor.run(
        call,
        async (args, context) => {
          const inner = { ...extra, signal: AbortSignal.any([extra.signal, context.signal]) };
          contexts.set(inner, context);
          const output = (await handler(...(hasArgs ? [args, inner] : [inner]))) as CallToolResult;
          if (output?.isError === true) throw new ToolResultError(output);
          return output;
        },
        policy,
      );
      return result.replayed || markFresh
        ? markResult(result.value, result.replayed, registered.outputSchema)
        : result.value;
    } catch (error) {
      if (error instanceof ToolResultError) return error.result;
      return forModel(error);
    }
  };

  const apply = () => {
    const kind = typeof raw.handler === 'function' ? kindOf(raw.name, raw.annotations) : 'skip';
    if (kind === 'skip') {
      Object.assign(tool, { description: raw.description, annotations: raw.annotations });
      tool[field] = raw.handler;
      return;
    }
    Object.assign(tool, {
      description: withRetryNote(raw.description, kind === 'wrap'),
      annotations: { ...raw.annotations, idempotentHint: kind === 'wrap' },
    });
    tool[field] = kind === 'wrap' ? wrapped : raw.handler;
  };

  // A later `update({ callback, description, annotations, name })` is wrapped again.
  const update = registered.update.bind(registered);
  registered.update = (updates) => {
    update(updates);
    if (typeof updates.name === 'string') raw.name = updates.name;
    if (updates.callback !== undefined) raw.handler = updates.callback;
    if (updates.description !== undefined) raw.description = updates.description;
    if (updates.annotations !== undefined) raw.annotations = updates.annotations;
    apply();
  };
  apply();
}

function prepare(server: McpServer, options: IdempotentServerOptions) {
  if (server === null || typeof server !== 'object' || typeof server.registerTool !== 'function') {
    throw new InvalidInputError({
      field: 'server',
      message:
        'Pass an McpServer from @modelcontextprotocol/sdk/server/mcp.js (new McpServer(...)).',
    });
  }
  if (wrappedServers.has(server)) {
    throw new InvalidInputError({
      field: 'server',
      message:
        'This server is already made idempotent by idempotentServer: give per-tool options in its policies, exclude and unsafe.',
    });
  }
  const executor = executorFrom(options, 'idempotentServer');
  for (const field of ['turnId', 'scope'] as const) {
    const value: unknown = options[field];
    if (value !== undefined && typeof value !== 'string' && typeof value !== 'function') {
      throw new InvalidInputError({
        field,
        message: `${field} must be a string or a function of the call, got ${typeof value}.`,
      });
    }
  }
  const exclude = new Set(options.exclude ?? []);
  const unsafe = new Set(options.unsafe ?? []);
  for (const name of unsafe) {
    if (exclude.has(name)) {
      throw new InvalidInputError({
        field: 'unsafe',
        message: `"${name}" is in both exclude and unsafe. Keep it in one of them.`,
      });
    }
  }
  const kindOf = (name: string, annotations: ToolAnnotations | undefined): Kind =>
    exclude.has(name)
      ? 'skip'
      : unsafe.has(name)
        ? 'unsafe'
        : annotations?.readOnlyHint === true && options.wrapReadOnly !== true
          ? 'skip'
          : 'wrap';
  return (name: unknown, registered: RegisteredTool) => {
    if (typeof name !== 'string') return; // the SDK rejected it already
    wrapRegistered(registered, name, executor, options, kindOf);
  };
}

/**
 * Make every tool of an MCP server idempotent: the ones registered already and every one
 * registered later (`registerTool`, and the deprecated `tool`). A retried `tools/call` (same
 * session or `_meta` turn id, same tool, same arguments) replays the stored `CallToolResult`,
 * marked replayed, instead of running the tool again. Returns the same server.
 *
 * ```ts
 * const server = idempotentServer(new McpServer({ name: 'helpdesk', version: '1.0.0' }), {
 *   store: openSqliteStore('mcp.db'),
 * });
 * server.registerTool('create_ticket', { inputSchema: { title: z.string() } }, createTicket);
 * ```
 */
export function idempotentServer<S extends McpServer>(
  server: S,
  options: IdempotentServerOptions,
): S {
  const wrap = prepare(server, options);
  const existing = (server as unknown as { _registeredTools?: Record<string, RegisteredTool> })
    ._registeredTools;
  for (const [name, registered] of Object.entries(existing ?? {})) wrap(name, registered);
  for (const method of ['registerTool', 'tool'] as const) {
    const original = server[method] as unknown as (...args: unknown[]) => RegisteredTool;
    if (typeof original !== 'function') continue;
    Object.defineProperty(server, method, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) => {
        const registered = original.apply(server, args);
        wrap(args[0], registered);
        return registered;
      },
    });
  }
  wrappedServers.add(server);
  return server;
}

/**
 * A `registerTool` for `server` whose tools are idempotent; `server.registerTool` itself is left
 * as it is (for tools you do not want wrapped). Same options as `idempotentServer`.
 *
 * ```ts
 * const registerTool = idempotentRegisterTool(server, { store, policies: { create_ticket: { ttl } } });
 * registerTool('create_ticket', { inputSchema: { title: z.string() } }, createTicket);
 * ```
 */
export function idempotentRegisterTool(
  server: McpServer,
  options: IdempotentServerOptions,
): McpServer['registerTool'] {
  const wrap = prepare(server, options);
  const registerTool = server.registerTool as unknown as (...args: unknown[]) => RegisteredTool;
  return ((...args: unknown[]) => {
    const registered = registerTool.apply(server, args);
    wrap(args[0], registered);
    return registered;
  }) as McpServer['registerTool'];
}
