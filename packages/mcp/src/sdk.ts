/**
 * The two MCP TypeScript SDKs as one view, in structural types (neither is imported): 1.x
 * (`@modelcontextprotocol/sdk`) calls a tool's `handler` / `callback` as `(args, extra)` or
 * `(extra)`, 2.x (`@modelcontextprotocol/server`) its `executor(args, ctx)`.
 */
import { mergeSignals, requestHeader, type ToolEntry } from '@idempotent-tools/core/adapter-kit';

/** What the SDK hands a tool callback besides its arguments: 1.x `extra`, or 2.x `ctx`. */
export interface ToolExtra {
  /** The session (stateful Streamable HTTP, SSE, a 2.x legacy session). */
  sessionId?: string | undefined;
  /** 1.x: the request's `_meta`, the access token's information, the signal, the HTTP headers. */
  _meta?: Record<string, unknown> | undefined;
  authInfo?: AuthInfoLike | undefined;
  signal?: AbortSignal | undefined;
  requestInfo?: { headers?: Record<string, unknown> } | undefined;
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
export type AuthInfoLike = {
  clientId?: string;
  extra?: Record<string, unknown>;
  [k: string]: unknown;
};

/** Either SDK's `McpServer`. */
export interface McpServerLike {
  registerTool: (...args: never[]) => unknown;
}

/** One `tools/call`: what `turnId` and `scope` functions are given, whichever SDK made it. */
export interface ToolCallInfo {
  toolName: string;
  /** The arguments, as parsed by the tool's `inputSchema` (`{}` for a tool without one). */
  args: Record<string, unknown>;
  /** What the SDK handed the tool: 1.x `extra`, 2.x `ctx`. */
  extra: ToolExtra;
  sessionId: string | undefined;
  /** The request's `_meta` (2.x: without the reserved envelope keys). */
  meta: Record<string, unknown> | undefined;
  /** The client's name: `clientInfo.name` of the request (2026-07-28) or of the session. */
  clientName: string | undefined;
  authInfo: AuthInfoLike | undefined;
  /** A header of the HTTP request (Streamable HTTP), lower or any case. */
  header(name: string): string | undefined;
}

/** The field the server calls to run the tool: 2.x `executor`, 1.23+ `handler`, else `callback`. */
export function entryField(tool: ToolEntry): 'executor' | 'handler' | 'callback' {
  if (typeof tool.executor === 'function') return 'executor';
  return 'handler' in tool ? 'handler' : 'callback';
}

/** The tool's callbacks (2.x `executor`, 1.x `handler` / `callback`), to refuse wrapped ones. */
export const callbacksOf = (tool: ToolEntry) => [tool.handler, tool.callback, tool.executor];

/** 1.x: the server of the session (its client, its capabilities, push-style elicitation). */
export type Session = {
  getClientCapabilities?: () => Capabilities;
  getClientVersion?: () => { name?: string } | undefined;
  elicitInput?: (params: unknown, options?: unknown) => Promise<unknown>;
  oninitialized?: (() => void) | undefined;
};
export type Capabilities = { elicitation?: { form?: unknown; url?: unknown } } | undefined;
export const sessionOf = (server: McpServerLike) => (server as { server?: Session }).server;

/** One call, as the adapter reads it. */
export function callInfo(
  toolName: string,
  args: Record<string, unknown>,
  extra: ToolExtra,
  server: McpServerLike,
): ToolCallInfo {
  const request = extra.mcpReq;
  const info = request?.envelope?.['io.modelcontextprotocol/clientInfo'] as { name?: unknown };
  return {
    ...{ toolName, args, extra, authInfo: extra.http?.authInfo ?? extra.authInfo },
    sessionId: typeof extra.sessionId === 'string' ? extra.sessionId : undefined,
    meta: request !== undefined ? request._meta : extra._meta,
    clientName:
      typeof info?.name === 'string' ? info.name : sessionOf(server)?.getClientVersion?.()?.name,
    header: (name) => requestHeader(extra.http?.req?.headers ?? extra.requestInfo?.headers, name),
  };
}

/** A copy of `extra` whose request signal also aborts with `signal` (the call lost its claim). */
export function withSignal(extra: ToolExtra, signal: AbortSignal): ToolExtra {
  const both = mergeSignals(extra.mcpReq?.signal ?? extra.signal, signal);
  return extra.mcpReq !== undefined
    ? { ...extra, mcpReq: { ...extra.mcpReq, signal: both } }
    : { ...extra, signal: both };
}

/** Whether the client takes form elicitation (`elicitation: {}` is form, the pre-mode rule). */
export function takesForm(capabilities: Capabilities): boolean {
  const elicitation = capabilities?.elicitation;
  if (elicitation === null || typeof elicitation !== 'object') return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}
