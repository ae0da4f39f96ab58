/**
 * A local Gemini API server (node:http on 127.0.0.1, random port) that plays a scripted model
 * for `POST /v1beta/models/{model}:generateContent` (JSON) and
 * `:streamGenerateContent?alt=sse` (server-sent events, one `GenerateContentResponse` per
 * event), and injects what agents meet on real networks: a connection dropped after the request
 * arrived, a reply cut in half (a broken stream), an HTTP error.
 * Point the real `@google/genai` client at it:
 * `new GoogleGenAI({ apiKey: 'test', httpOptions: { baseUrl: server.baseUrl } })`.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * - `drop`: the request arrives, then the connection is closed without a response.
 * - `truncate`: the reply is generated and half of it sent (half of the events of a stream: a
 *   broken stream), then the connection is cut.
 * - `{ status }`: an HTTP error with that status (the SDK retries 408, 429 and 5xx only when
 *   `httpOptions.retryOptions` is set).
 */
export type Fault = 'drop' | 'truncate' | { status: number };

type Part = Record<string, unknown> & {
  text?: string;
  functionCall?: { name?: string; args?: unknown; id?: string };
  functionResponse?: { name?: string; response?: Record<string, unknown>; id?: string };
};
type Content = { role?: string; parts?: Part[] };

/** What the scripted model sees of one request. */
export interface ModelTurn {
  /** The model of the path (`gemini-2.5-flash`). */
  model: string;
  stream: boolean;
  /** The parsed request body (`contents`, `systemInstruction`, `tools`, `generationConfig`...). */
  body: Record<string, unknown>;
  contents: Content[];
  /** The text of the last user content that is not only function responses. */
  userText: string;
  /** The system instruction's text ('' when none). */
  system: string;
  /** The function responses sent after that user content, in order. */
  functionResponses: Array<{ name: string; response: Record<string, unknown>; id?: string }>;
}

/** The scripted model's answer: text and/or function calls (each gets a fresh call id). */
export interface ScriptedReply {
  text?: string;
  functionCalls?: Array<{ name: string; args?: Record<string, unknown> }>;
}

export interface RecordedRequest {
  index: number;
  method: string;
  /** The path without the query (`/v1beta/models/m:generateContent`). */
  path: string;
  /** The request headers (lower-case names; `x-goog-api-key` carries the API key). */
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  fault: Fault | undefined;
}

export interface ScriptedServerOptions {
  /** The scripted model. */
  respond: (turn: ModelTurn) => ScriptedReply;
  /** Faults for the coming requests, in arrival order (`undefined`: answer normally). @default [] */
  faults?: Array<Fault | undefined>;
  /** Give function calls an `id`, as the Gemini API does. @default true */
  callIds?: boolean;
}

export interface ScriptedServer {
  /** e.g. `http://127.0.0.1:53117`: pass it as `httpOptions.baseUrl`. */
  baseUrl: string;
  /** Every request received, faulted or not. */
  requests: RecordedRequest[];
  /** Queue faults for the next requests. */
  inject(...faults: Array<Fault | undefined>): void;
  close(): Promise<void>;
}

const textOf = (content: Content | undefined) =>
  (content?.parts ?? []).map((p) => (typeof p.text === 'string' ? p.text : '')).join('');

/** The model's view of a request body. */
function modelTurn(model: string, stream: boolean, body: Record<string, unknown>): ModelTurn {
  const contents = (body.contents ?? []) as Content[];
  const said = contents.findLastIndex(
    (c) => c.role !== 'model' && (c.parts ?? []).some((p) => p.functionResponse === undefined),
  );
  const functionResponses = contents
    .slice(said + 1)
    .flatMap((c) => (c.role === 'model' ? [] : (c.parts ?? [])))
    .flatMap((p) => (p.functionResponse === undefined ? [] : [p.functionResponse]))
    .map((r) => ({
      name: r.name ?? '',
      response: r.response ?? {},
      ...(r.id === undefined ? {} : { id: r.id }),
    }));
  return {
    model,
    stream,
    body,
    contents,
    userText: said < 0 ? '' : textOf(contents[said]),
    system: textOf(body.systemInstruction as Content | undefined),
    functionResponses,
  };
}

/** The `GenerateContentResponse` chunks of a reply: one for JSON; text in two halves for a stream. */
function replyChunks(turn: ModelTurn, reply: ScriptedReply, id: string, callIds: boolean) {
  const calls: Part[] = (reply.functionCalls ?? []).map((c) => ({
    functionCall: {
      name: c.name,
      args: c.args ?? {},
      ...(callIds ? { id: `call_${randomUUID().slice(0, 8)}` } : {}),
    },
  }));
  const text = reply.text ?? '';
  const halves =
    turn.stream && text.length > 1
      ? [text.slice(0, text.length / 2), text.slice(text.length / 2)]
      : [text];
  const textParts: Part[][] = text === '' ? [] : halves.map((t) => [{ text: t }]);
  const groups = turn.stream
    ? [...textParts, ...(calls.length > 0 ? [calls] : [])]
    : [[...textParts.flat(), ...calls]];
  if (groups.length === 0) groups.push([{ text: '' }]);
  const usage = { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 };
  return groups.map((parts, i) => {
    const last = i === groups.length - 1;
    return {
      candidates: [
        { content: { role: 'model', parts }, index: 0, ...(last ? { finishReason: 'STOP' } : {}) },
      ],
      ...(last ? { usageMetadata: usage } : {}),
      modelVersion: turn.model,
      responseId: id,
    };
  });
}

/** Start the server; close it when done. */
export async function startScriptedServer(options: ScriptedServerOptions): Promise<ScriptedServer> {
  const faults = [...(options.faults ?? [])];
  const requests: RecordedRequest[] = [];
  const tag = randomUUID().slice(0, 8);
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
      const url = new URL(req.url ?? '/', 'http://localhost');
      const fault = faults.shift();
      const recorded: RecordedRequest = {
        index: requests.length,
        method: req.method ?? 'GET',
        path: url.pathname,
        headers: req.headers,
        body,
        fault,
      };
      requests.push(recorded);
      const send = (status: number, payload: unknown) => {
        const bytes = Buffer.from(JSON.stringify(payload));
        res.writeHead(status, { 'content-type': 'application/json' });
        if (fault !== 'truncate') return void res.end(bytes);
        res.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
        setTimeout(() => req.socket.destroy(), 5);
      };
      if (fault === 'drop') return void req.socket.destroy();
      if (typeof fault === 'object') {
        return send(fault.status, {
          error: { code: fault.status, message: 'injected', status: 'UNAVAILABLE' },
        });
      }
      const route = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(
        url.pathname,
      );
      if (route === null || req.method !== 'POST') {
        return send(404, {
          error: {
            code: 404,
            message: `No route ${req.method} ${url.pathname}`,
            status: 'NOT_FOUND',
          },
        });
      }
      const stream = route[2] === 'streamGenerateContent';
      const turn = modelTurn(route[1] as string, stream, (body ?? {}) as Record<string, unknown>);
      const reply = replyChunks(
        turn,
        options.respond(turn),
        `${tag}_${recorded.index}`,
        options.callIds ?? true,
      );
      if (!stream) return send(200, reply[0]);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const events = reply.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`);
      if (fault !== 'truncate') return void res.end(events.join(''));
      // A broken stream: the first half of the events (at least one), then the connection is cut.
      res.write(events.slice(0, Math.max(1, Math.floor(events.length / 2))).join(''));
      setTimeout(() => req.socket.destroy(), 5);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    inject: (...more) => void faults.push(...more),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
