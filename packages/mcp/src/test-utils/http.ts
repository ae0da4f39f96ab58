import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export interface HttpServerOptions {
  /** A new McpServer (one per session, or per request when stateless). */
  createServer: () => McpServer;
  /** Answer with one JSON body instead of an SSE stream. @default false */
  json?: boolean;
  /** No session ids (a new transport per request). @default false */
  stateless?: boolean;
}

/**
 * The SDK's `StreamableHTTPServerTransport` on a node:http server on 127.0.0.1 (port 0), with a
 * fault: `dropNextResult()` makes the server destroy the socket instead of writing the result of
 * the next `tools/call` (the tool has run; the client never hears of it).
 */
export async function startHttpServer(options: HttpServerOptions) {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let drop = false;
  let dropped = 0;
  /** The JSON-RPC requests received, in order. */
  const requests: Array<{ method: string; id: unknown }> = [];

  const cutOnResult = (req: IncomingMessage, res: ServerResponse) => {
    for (const method of ['write', 'end'] as const) {
      const original = res[method].bind(res) as (...args: unknown[]) => unknown;
      Object.assign(res, {
        [method]: (chunk: unknown, ...rest: unknown[]) => {
          const text =
            typeof chunk === 'string' || chunk instanceof Uint8Array
              ? Buffer.from(chunk).toString()
              : '';
          if (text.includes('"result"')) {
            dropped++;
            req.socket.destroy();
            return method === 'end' ? res : true;
          }
          return original(chunk, ...rest);
        },
      });
    }
  };

  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    if (typeof body?.method === 'string') requests.push({ method: body.method, id: body.id });
    if (drop && body?.method === 'tools/call') {
      drop = false;
      cutOnResult(req, res);
    }
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
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;

  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    requests,
    /** Cut the connection when the next `tools/call` result is written. */
    dropNextResult: () => {
      drop = true;
    },
    /** How many results were dropped. */
    dropped: () => dropped,
    close: async () => {
      for (const transport of sessions.values()) await transport.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

/** A real SDK `Client` over `StreamableHTTPClientTransport`. */
export async function connectHttp(url: URL) {
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client({ name: 'http-client', version: '1.0.0' });
  await client.connect(transport);
  return { client, sessionId: () => transport.sessionId };
}
