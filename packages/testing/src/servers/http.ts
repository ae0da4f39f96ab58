// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
/**
 * The HTTP side of the scripted provider servers (OpenAI, Anthropic, Gemini): node:http on
 * 127.0.0.1 at a random port, each request's body read and parsed, each request recorded with the
 * fault it meets, the faults themselves, and the replies (JSON, server-sent events) a `truncate`
 * fault cuts in half. Each server adds only its API: routes, its model's view of a request, its
 * reply and event formats, its error bodies.
 * @internal
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What a server can do to a request instead of answering it normally: `drop` the connection,
 * never answer (`timeout`), send half of the reply (`truncate`), or answer an HTTP error.
 */
export type HttpFault = 'drop' | 'timeout' | 'truncate' | { status: number };

/** One request as a server received it. */
export interface ScriptedRequest<F extends HttpFault> {
  index: number;
  method: string;
  /** The path, as the server records it (see `ScriptedHttpOptions.path`). */
  path: string;
  /** The request headers (lower-case names). */
  headers: IncomingHttpHeaders;
  /** The parsed JSON body; the text when it is not JSON; undefined when empty. */
  body: unknown;
  fault: F | undefined;
}

/** How a server answers one request. A `truncate` fault cuts either reply in half. */
export interface ScriptedReply {
  /** `payload` as JSON with `status`. */
  json(status: number, payload: unknown): void;
  /** Server-sent events (`text/event-stream`), with `headers` added. */
  events(events: readonly string[], headers?: Record<string, string>): void;
}

export interface ScriptedHttpOptions<F extends HttpFault> {
  /** Faults for the coming requests, in arrival order (`undefined`: answer normally). */
  faults: Array<F | undefined> | undefined;
  /** The path a request is recorded (and routed) by, from its URL. */
  path(url: string): string;
  /** The body of an injected HTTP error (a `{ status }` fault). */
  injected(status: number): unknown;
  /** Send a JSON reply's `content-length` up front. @default false (set by Node unless cut) */
  contentLength?: boolean;
  /** Answer a request that met no fault, or a `truncate` one (`reply` cuts it). */
  handle(request: ScriptedRequest<F>, reply: ScriptedReply): void;
}

export interface ScriptedHttpServer<F extends HttpFault> {
  /** e.g. `http://127.0.0.1:53117`. */
  origin: string;
  /** Every request received, faulted or not. */
  requests: ScriptedRequest<F>[];
  /** Queue faults for the next requests. */
  inject(...faults: Array<F | undefined>): void;
  close(): Promise<void>;
}

/** Start a scripted HTTP server; close it when done. */
export async function startScriptedHttp<F extends HttpFault>(
  options: ScriptedHttpOptions<F>,
): Promise<ScriptedHttpServer<F>> {
  const faults = [...(options.faults ?? [])];
  const requests: ScriptedRequest<F>[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown = raw;
      try {
        body = raw === '' ? undefined : JSON.parse(raw);
      } catch {
        // not JSON: keep the text
      }
      const fault = faults.shift();
      const request: ScriptedRequest<F> = {
        index: requests.length,
        method: req.method ?? 'GET',
        path: options.path(req.url ?? '/'),
        headers: req.headers,
        body,
        fault,
      };
      requests.push(request);
      const cut = () => setTimeout(() => req.socket.destroy(), 5);
      const reply: ScriptedReply = {
        json: (status, payload) => {
          const bytes = Buffer.from(JSON.stringify(payload));
          res.writeHead(status, {
            'content-type': 'application/json',
            ...(options.contentLength === true ? { 'content-length': bytes.length } : {}),
          });
          if (fault !== 'truncate') return void res.end(bytes);
          res.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
          cut();
        },
        events: (events, headers = {}) => {
          res.writeHead(200, {
            'content-type': 'text/event-stream',
            'cache-control': 'no-cache',
            ...headers,
          });
          if (fault !== 'truncate') return void res.end(events.join(''));
          // A broken stream: the first half of the events (at least one), then the connection is cut.
          res.write(events.slice(0, Math.max(1, Math.floor(events.length / 2))).join(''));
          cut();
        },
      };
      if (fault === 'drop') return void req.socket.destroy();
      if (fault === 'timeout') return; // never answered; closed with the server
      if (typeof fault === 'object')
        return reply.json(fault.status, options.injected(fault.status));
      options.handle(request, reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    inject: (...more) => void faults.push(...more),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
