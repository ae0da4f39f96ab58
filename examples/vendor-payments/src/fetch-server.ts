/**
 * A small fetch adapter for node:http: each request becomes a `Request`, the handler's
 * `Response` is written back. Enough to serve a fetch-style handler (`idempotentHandler`'s) on
 * 127.0.0.1 without a framework; Hono's `@hono/node-server` does the same, with streaming.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the handler returns: a response, or `'drop'` to close the socket without one. */
export type FetchHandler = (request: Request) => Promise<Response | 'drop'>;

export interface FetchServer {
  server: Server;
  url: string;
}

async function toRequest(req: IncomingMessage, origin: string): Promise<Request> {
  const headers = new Headers();
  // rawHeaders keeps repeated fields: two Idempotency-Key fields become "a, b" (a 400).
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const method = req.method ?? 'GET';
  const body = method === 'GET' || method === 'HEAD' ? null : Buffer.concat(chunks);
  return new Request(new URL(req.url ?? '/', origin), { method, headers, body });
}

export async function listenFetch(handler: FetchHandler): Promise<FetchServer> {
  let origin = '';
  const server = createServer((req, res) => {
    (async () => {
      const response = await handler(await toRequest(req, origin));
      if (response === 'drop') {
        res.socket?.destroy(); // the work is done, the caller never hears of it
        return;
      }
      const body = Buffer.from(await response.arrayBuffer());
      // A flat [name, value, name, value, ...] list keeps repeated fields apart.
      const headers = [...response.headers].flat();
      if (response.statusText === '') res.writeHead(response.status, headers);
      else res.writeHead(response.status, response.statusText, headers);
      res.end(body);
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: String(error) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  origin = `http://127.0.0.1:${port}`;
  return { server, url: origin };
}
