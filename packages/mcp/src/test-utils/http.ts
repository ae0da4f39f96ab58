import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/** Either SDK's McpServer, as the test servers use it. */
// biome-ignore lint/suspicious/noExplicitAny: one factory type for both SDKs' McpServer
type AnyServer = any;

export interface HttpServerOptions {
  /** A new McpServer (one per session, or per request when stateless / 2026-07-28). */
  createServer: () => AnyServer;
  /** Answer with one JSON body instead of an SSE stream. @default false */
  json?: boolean;
  /** 1.x: no session ids (a new transport per request). @default false */
  stateless?: boolean;
}

/** Make `res` destroy the socket instead of writing a JSON-RPC result (the tool has run). */
function cutOnResult(req: IncomingMessage, res: ServerResponse, onCut: () => void) {
  for (const method of ['write', 'end'] as const) {
    const original = res[method].bind(res) as (...args: unknown[]) => unknown;
    Object.assign(res, {
      [method]: (chunk: unknown, ...rest: unknown[]) => {
        const text =
          typeof chunk === 'string' || chunk instanceof Uint8Array
            ? Buffer.from(chunk).toString()
            : '';
        if (text.includes('"result"')) {
          onCut();
          req.socket.destroy();
          return method === 'end' ? res : true;
        }
        return original(chunk, ...rest);
      },
    });
  }
}

export async function listen(
  serve: (req: IncomingMessage, res: ServerResponse, body: unknown) => Promise<void>,
  close: () => Promise<void> = async () => {},
) {
  let drop: ((body: { params?: Record<string, unknown> }) => boolean) | undefined;
  let dropped = 0;
  /** The JSON-RPC requests received, in order, with the headers of their HTTP request. */
  const requests: Array<{
    method: string;
    id: unknown;
    meta: unknown;
    headers: IncomingMessage['headers'];
  }> = [];
  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    if (typeof body?.method === 'string') {
      requests.push({
        method: body.method,
        id: body.id,
        meta: body.params?._meta,
        headers: req.headers,
      });
    }
    if (drop !== undefined && body?.method === 'tools/call' && drop(body)) {
      drop = undefined;
      cutOnResult(req, res, () => dropped++);
    }
    await serve(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    requests,
    /** Cut the connection when the next `tools/call` (that `which` picks) result is written. */
    dropNextResult: (
      which: (body: { params?: Record<string, unknown> }) => boolean = () => true,
    ) => {
      drop = which;
    },
    /** How many results were dropped. */
    dropped: () => dropped,
    close: async () => {
      await close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/**
 * `@modelcontextprotocol/sdk` 1.x: its `StreamableHTTPServerTransport` on node:http on
 * 127.0.0.1 (port 0), stateful (a session per client) or stateless, with a fault:
 * `dropNextResult()` destroys the socket instead of writing the next `tools/call` result.
 */
export async function startHttpServer(options: HttpServerOptions) {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  return listen(
    async (req, res, body) => {
      const sessionId = req.headers['mcp-session-id'];
      let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
      if (transport === undefined) {
        const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          enableJsonResponse: options.json ?? false,
          ...(options.stateless
            ? {} // no sessionIdGenerator: stateless
            : {
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: (id: string) => {
                  sessions.set(id, created);
                },
              }),
        });
        transport = created;
        await options.createServer().connect(transport);
      }
      await transport.handleRequest(req, res, body);
    },
    async () => {
      for (const transport of sessions.values()) await transport.close();
    },
  );
}

/** A real 1.x SDK `Client` over `StreamableHTTPClientTransport`. */
export async function connectHttp(
  url: URL,
  name = 'http-client',
  headers?: Record<string, string>,
) {
  const transport = new StreamableHTTPClientTransport(
    url,
    headers ? { requestInit: { headers } } : {},
  );
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return { client, sessionId: () => transport.sessionId };
}
