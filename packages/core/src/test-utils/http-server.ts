/**
 * Tests only: a node:http server on 127.0.0.1 that serves a fetch-style handler (the small
 * fetch adapter Hono's and others' Node servers are), with a fault: drop a response after the
 * handler ran (the socket is destroyed instead), as a lost reply looks to a client.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Requests received, in order. */
  requests: number;
  close(): Promise<void>;
}

async function toRequest(req: IncomingMessage): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const method = req.method ?? 'GET';
  return new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`, {
    method,
    headers,
    ...(method === 'GET' || method === 'HEAD' ? {} : { body: Buffer.concat(chunks) }),
  });
}

/**
 * Serve `handler`. `drop(request, n)` (n = 0, 1, ... per request) true: the handler runs, then
 * the connection is destroyed without a response.
 */
export async function serveFetch(
  handler: (request: Request) => Response | Promise<Response>,
  options: { drop?: (request: Request, n: number) => boolean } = {},
): Promise<TestServer> {
  let requests = 0;
  const server = createServer(async (req, res) => {
    const n = requests++;
    try {
      const request = await toRequest(req);
      const drop = options.drop?.(request, n) === true;
      const response = await handler(request);
      const body = Buffer.from(await response.arrayBuffer());
      if (drop) {
        req.socket.destroy();
        return;
      }
      res.statusCode = response.status;
      res.statusMessage = response.statusText;
      for (const [name, value] of response.headers) {
        if (name !== 'set-cookie') res.setHeader(name, value);
      }
      const cookies = response.headers.getSetCookie();
      if (cookies.length > 0) res.setHeader('set-cookie', cookies);
      res.end(body);
    } catch (error) {
      res.statusCode = 500;
      res.end(`handler threw: ${(error as Error).message}`);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
