/**
 * Requests a tool sends past the vendor helpers (a plain `fetch`, an SDK on `node:http`): seen on
 * Node's diagnostics channels and counted for the tool call whose async context sent them, so
 * that `onToolError: 'auto'` keeps an attempt whose request may have reached a vendor before it
 * threw (a client timeout after the vendor got the request) instead of releasing it for a blind
 * re-run. A request counts once it may have left: undici's headers were written to a socket; a
 * `node:http` request got a connected socket (a refused connection sent nothing). Safe methods
 * (GET, HEAD, OPTIONS, TRACE) never count. Where the channels do not exist (a runtime without
 * Node's channels: Deno, Bun, Workers, edge runtimes), only the vendor helpers are seen, and
 * `onToolError: 'auto'` keeps every attempt that threw (`executor/run-tool.ts`).
 */

import { noteEffect, runningContext } from '../executor/context.js';
import type { ExecutionContext } from '../executor/types.js';
import { builtinModule, isNode } from '../runtime/index.js';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

type Channels = {
  subscribe(name: string, listener: (message: unknown, name: string | symbol) => void): void;
};

interface Socketish {
  connecting?: boolean;
  once(event: string, listener: () => void): unknown;
}
interface ClientRequestish {
  method?: string;
  socket?: Socketish | null;
  once(event: 'socket', listener: (socket: Socketish) => void): unknown;
}

let watching = false;

/** Start counting requests for tool calls (once per process; executors call it when made). */
export function watchRequests(): void {
  if (watching) return;
  watching = true;
  // Only Node's `fetch` (undici) and `node:http` report on these channels (Deno, Bun and Workers
  // have the module, but their requests never appear in it).
  const channels = isNode ? builtinModule<Channels>('node:diagnostics_channel') : undefined;
  if (channels === undefined) return;
  const unsafe = (method: unknown) => typeof method === 'string' && !SAFE.has(method.toUpperCase());

  // undici (`fetch`): the request is created in the caller's context; its headers are written
  // later, from the connection's.
  const created = new WeakMap<object, ExecutionContext>();
  channels.subscribe('undici:request:create', (message) => {
    const { request } = message as { request: { method?: string } };
    const context = runningContext();
    if (context !== undefined && unsafe(request.method)) created.set(request, context);
  });
  channels.subscribe('undici:client:sendHeaders', (message) => {
    const { request } = message as { request: object };
    const context = created.get(request);
    if (context === undefined) return;
    created.delete(request);
    noteEffect(context, 'requests');
  });

  // node:http: started in the caller's context; it may leave once its socket is connected.
  channels.subscribe('http.client.request.start', (message) => {
    const { request } = message as { request: ClientRequestish };
    const context = runningContext();
    if (context === undefined || !unsafe(request.method)) return;
    const left = () => noteEffect(context, 'requests');
    const onSocket = (socket: Socketish) => {
      if (socket.connecting === true) socket.once('connect', left);
      else left();
    };
    if (request.socket != null) onSocket(request.socket);
    else request.once('socket', onSocket);
  });
}
