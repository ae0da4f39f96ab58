/**
 * The two MCP TypeScript SDKs, mapped to one view, so the adapter's logic is written once:
 * - `@modelcontextprotocol/sdk` 1.x (protocol 2025-11-25 and before): the server calls a tool's
 *   `handler` (1.23+; `callback` before) as `(args, extra)` or `(extra)`; `extra` carries
 *   `sessionId`, `_meta`, `authInfo`, `requestInfo.headers`, `taskId` and `signal`.
 * - `@modelcontextprotocol/server` 2.x (2026-07-28, and 2025 traffic on its legacy leg): the
 *   server calls a tool's `executor(args, ctx)`; `ctx.mcpReq` carries `_meta`, the per-request
 *   `envelope` (protocol version, `clientInfo`), `signal` and the multi round-trip answers;
 *   `ctx.http` carries `authInfo` and the `Request`.
 * Only structural types: neither SDK is imported, so either may be absent.
 */

/** What the SDK hands a tool callback besides its arguments: 1.x `extra`, or 2.x `ctx`. */
export interface ToolExtra {
  /** The session (stateful Streamable HTTP, SSE, a 2.x legacy session). */
  sessionId?: string | undefined;
  /** 1.x: the request's `_meta`. */
  _meta?: Record<string, unknown> | undefined;
  /** 1.x: the validated access token's information. */
  authInfo?: AuthInfoLike | undefined;
  /** 1.x: the abort signal of the request. */
  signal?: AbortSignal | undefined;
  /** 2.x: the request (`_meta` without the envelope, `envelope`, `signal`, `inputResponses`). */
  mcpReq?: {
    _meta?: Record<string, unknown>;
    envelope?: Record<string, unknown>;
    signal?: AbortSignal;
  };
  /** 2.x: the HTTP request and `authInfo`. */
  http?: { authInfo?: AuthInfoLike; req?: { headers: { get(name: string): string | null } } };
  [field: string]: unknown;
}

/** The part of an access token's information the adapter reads. */
export interface AuthInfoLike {
  clientId?: string;
  extra?: Record<string, unknown>;
  [field: string]: unknown;
}

/** A `CallToolResult` of either SDK, as far as the adapter reads it. */
export interface CallToolResult {
  content?: Array<{ type: string; [field: string]: unknown }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  idempotentHint?: boolean;
  [field: string]: unknown;
}

/** A registered tool of either SDK's `McpServer`. */
export interface RegisteredTool {
  description?: string | undefined;
  annotations?: ToolAnnotations | undefined;
  outputSchema?: unknown;
  update(updates: {
    callback?: unknown;
    description?: string;
    annotations?: ToolAnnotations;
    name?: string | null;
    [field: string]: unknown;
  }): void;
  [field: string]: unknown;
}

/** Either SDK's `McpServer`. */
export interface McpServerLike {
  registerTool: (...args: never[]) => unknown;
}

/** What the adapter reads of one call, whichever SDK made it. */
export interface CallView {
  sessionId: string | undefined;
  /** The request's `_meta` (2.x: without the reserved envelope keys). */
  meta: Record<string, unknown> | undefined;
  /** The client's name: `clientInfo.name` of the request (2026-07-28) or of the session. */
  clientName: string | undefined;
  authInfo: AuthInfoLike | undefined;
  /** A header of the HTTP request (Streamable HTTP), lower or any case. */
  header(name: string): string | undefined;
}

const CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** The field the server calls to run the tool: 2.x `executor`, 1.23+ `handler`, else `callback`. */
export function entryField(tool: RegisteredTool): 'executor' | 'handler' | 'callback' {
  if (typeof tool.executor === 'function') return 'executor';
  return 'handler' in tool ? 'handler' : 'callback';
}

/** The view of one call's `extra` / `ctx`; `server` gives the session's client (1.x). */
export function viewOf(extra: ToolExtra, server: McpServerLike): CallView {
  const modern = extra.mcpReq;
  const headers = extra.requestInfo as { headers?: Record<string, unknown> } | undefined;
  const { server: inner } = server as {
    server?: { getClientVersion?: () => { name?: string } | undefined };
  };
  const session = inner?.getClientVersion?.();
  const info = modern?.envelope?.[CLIENT_INFO] as { name?: unknown } | undefined;
  return {
    sessionId: typeof extra.sessionId === 'string' ? extra.sessionId : undefined,
    meta: modern !== undefined ? modern._meta : extra._meta,
    clientName: typeof info?.name === 'string' ? info.name : session?.name,
    authInfo: extra.http?.authInfo ?? extra.authInfo,
    header(name) {
      const fromRequest = extra.http?.req?.headers.get(name);
      if (typeof fromRequest === 'string') return fromRequest;
      const value = headers?.headers?.[name.toLowerCase()];
      return typeof value === 'string'
        ? value
        : Array.isArray(value)
          ? value.join(', ')
          : undefined;
    },
  };
}

/** The id of the task a request belongs to (`_meta["io.modelcontextprotocol/related-task"]`). */
export function relatedTaskId(view: CallView): string | undefined {
  const id = (view.meta?.[RELATED_TASK] as { taskId?: unknown } | undefined)?.taskId;
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** The signal of the request. */
export function signalOf(extra: ToolExtra): AbortSignal | undefined {
  return extra.mcpReq?.signal ?? extra.signal;
}

/** A copy of `extra` whose request signal is `signal`. */
export function withSignal(extra: ToolExtra, signal: AbortSignal): ToolExtra {
  return extra.mcpReq !== undefined
    ? { ...extra, mcpReq: { ...extra.mcpReq, signal } }
    : { ...extra, signal };
}

/** A 2026-07-28 multi round-trip result: the tool asks the client for input first. */
export function isInputRequired(value: unknown): boolean {
  return (value as { resultType?: unknown } | null)?.resultType === 'input_required';
}

/**
 * Whether the tool's output schema declares a `replayed` property: zod 4 or 3 objects (1.x and
 * 2.x), or the JSON Schema 2.x advertises. Undefined when the tool has no output schema.
 */
export function outputDeclaresReplayed(tool: RegisteredTool): boolean | undefined {
  if (tool.outputSchema === undefined) return undefined;
  const json = tool.outputSchemaJson as { properties?: Record<string, unknown> } | undefined;
  const schema = tool.outputSchema as { shape?: unknown; _zod?: { def?: { shape?: unknown } } };
  const shape = json?.properties ?? schema._zod?.def?.shape ?? schema.shape;
  return shape !== null && typeof shape === 'object' && Object.hasOwn(shape, 'replayed');
}

/** One `tools/call`: what `turnId` and `scope` functions are given. */
export interface ToolCallInfo extends CallView {
  toolName: string;
  /** The arguments, as parsed by the tool's `inputSchema` (`{}` for a tool without one). */
  args: Record<string, unknown>;
  /** What the SDK handed the tool: 1.x `extra`, 2.x `ctx`. */
  extra: ToolExtra;
}
