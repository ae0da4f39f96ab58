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
import { type ScriptedRequest, startScriptedHttp } from './http.js';

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

/**
 * One request as the server received it: its path without the query
 * (`/v1beta/models/m:generateContent`); `x-goog-api-key` among its headers carries the API key.
 */
export type RecordedRequest = ScriptedRequest<Fault>;

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
  const tag = randomUUID().slice(0, 8);
  const { origin, ...server } = await startScriptedHttp<Fault>({
    faults: options.faults,
    path: (url) => new URL(url, 'http://localhost').pathname,
    injected: (status) => ({ error: { code: status, message: 'injected', status: 'UNAVAILABLE' } }),
    handle: ({ index, method, path, body }, reply) => {
      const route = /\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path);
      if (route === null || method !== 'POST') {
        const message = `No route ${method} ${path}`;
        return reply.json(404, { error: { code: 404, message, status: 'NOT_FOUND' } });
      }
      const stream = route[2] === 'streamGenerateContent';
      const turn = modelTurn(route[1] as string, stream, (body ?? {}) as Record<string, unknown>);
      const id = `${tag}_${index}`;
      const chunks = replyChunks(turn, options.respond(turn), id, options.callIds ?? true);
      if (!stream) return reply.json(200, chunks[0]);
      reply.events(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`));
    },
  });
  return { baseUrl: origin, ...server };
}
