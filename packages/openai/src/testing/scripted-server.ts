/**
 * A local OpenAI-compatible HTTP server (node:http on 127.0.0.1, random port) that plays a
 * scripted model for Chat Completions and Responses, and injects what agents meet on real
 * networks: a connection dropped after the request arrived, a timeout, a truncated body, a 5xx.
 * Point the real `openai` client at it: `new OpenAI({ baseURL: server.baseURL, apiKey: 'test' })`.
 * Non-streaming requests only.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * - `drop`: the request arrives, then the connection is closed without a response (the SDK retries).
 * - `timeout`: the request arrives and is never answered (the client's timeout fires; the SDK retries).
 * - `truncate`: the reply is generated and half of its body sent, then the connection is cut
 *   (the SDK throws `TypeError: terminated`; the app must retry).
 * - `{ status }`: an HTTP error with that status (the SDK retries 408, 409, 429 and 5xx).
 */
export type Fault = 'drop' | 'timeout' | 'truncate' | { status: number };

/** What the scripted model sees of one request. */
export interface ModelTurn {
  api: 'chat' | 'responses';
  /** The parsed request body. */
  body: Record<string, unknown>;
  /** The text of the last user message. */
  userText: string;
  /** The tool outputs sent after the last user message, in order (their `content` / `output`). */
  toolOutputs: string[];
}

/** The scripted model's answer: text and/or function calls (each gets a fresh call id). */
export interface ScriptedReply {
  content?: string;
  toolCalls?: Array<{ name: string; arguments: string | Record<string, unknown> }>;
}

export interface RecordedRequest {
  index: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  fault: Fault | undefined;
}

export interface ScriptedServerOptions {
  /** The scripted model. */
  respond: (turn: ModelTurn) => ScriptedReply;
  /** Faults for the coming requests, in arrival order (`undefined`: answer normally). @default [] */
  faults?: Array<Fault | undefined>;
  /** Other routes (a vendor API): the JSON reply to a request. @default 404 */
  route?: (request: RecordedRequest) => { status?: number; body: unknown };
}

export interface ScriptedServer {
  /** e.g. `http://127.0.0.1:53117/v1`. */
  baseURL: string;
  /** Every request received, faulted or not. */
  requests: RecordedRequest[];
  /** Queue faults for the next requests. */
  inject(...faults: Array<Fault | undefined>): void;
  close(): Promise<void>;
}

type Message = { role?: string; type?: string; content?: unknown; output?: unknown };

const text = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((part) => (part as { text?: string }).text ?? '').join('')
      : JSON.stringify(content ?? '');

function modelTurn(api: ModelTurn['api'], body: Record<string, unknown>): ModelTurn {
  const raw = api === 'chat' ? body.messages : body.input;
  const items: Message[] =
    typeof raw === 'string' ? [{ role: 'user', content: raw }] : ((raw ?? []) as Message[]);
  const lastUser = items.findLastIndex((m) => m.role === 'user');
  const after = items.slice(lastUser + 1);
  const toolOutputs =
    api === 'chat'
      ? after.filter((m) => m.role === 'tool').map((m) => text(m.content))
      : after.filter((m) => m.type === 'function_call_output').map((m) => text(m.output));
  return { api, body, userText: lastUser < 0 ? '' : text(items[lastUser]?.content), toolOutputs };
}

function replyBody(turn: ModelTurn, reply: ScriptedReply, index: number): unknown {
  const calls = (reply.toolCalls ?? []).map((c) => ({
    id: `call_${randomUUID().slice(0, 8)}`,
    name: c.name,
    arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
  }));
  const model = String(turn.body.model ?? 'scripted');
  const created = Math.floor(Date.now() / 1000);
  if (turn.api === 'chat') {
    return {
      id: `chatcmpl-${index}`,
      object: 'chat.completion',
      created,
      model,
      choices: [
        {
          index: 0,
          finish_reason: calls.length > 0 ? 'tool_calls' : 'stop',
          logprobs: null,
          message: {
            role: 'assistant',
            content: reply.content ?? null,
            refusal: null,
            ...(calls.length > 0
              ? {
                  tool_calls: calls.map((c) => ({
                    id: c.id,
                    type: 'function',
                    function: { name: c.name, arguments: c.arguments },
                  })),
                }
              : {}),
          },
        },
      ],
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    };
  }
  const output: unknown[] = calls.map((c) => ({
    type: 'function_call',
    id: `fc_${c.id.slice(5)}`,
    call_id: c.id,
    name: c.name,
    arguments: c.arguments,
    status: 'completed',
  }));
  if (reply.content !== undefined) {
    output.push({
      type: 'message',
      id: `msg_${index}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: reply.content, annotations: [] }],
    });
  }
  return {
    id: `resp_${index}`,
    object: 'response',
    created_at: created,
    status: 'completed',
    model,
    output,
    output_text: reply.content ?? '',
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    parallel_tool_calls: true,
    temperature: 1,
    top_p: 1,
    tool_choice: 'auto',
    tools: [],
    usage: {
      input_tokens: 0,
      output_tokens: 0,
      total_tokens: 0,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  };
}

/** Start the server; close it when done. */
export async function startScriptedServer(options: ScriptedServerOptions): Promise<ScriptedServer> {
  const faults = [...(options.faults ?? [])];
  const requests: RecordedRequest[] = [];
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
      const path = (req.url ?? '/').replace(/^\/v1/, '');
      const fault = faults.shift();
      const recorded: RecordedRequest = {
        index: requests.length,
        method: req.method ?? 'GET',
        path,
        headers: req.headers,
        body,
        fault,
      };
      requests.push(recorded);
      if (fault === 'drop') return void req.socket.destroy();
      if (fault === 'timeout') return; // never answered; closed with the server
      if (typeof fault === 'object') {
        res.writeHead(fault.status, { 'content-type': 'application/json' });
        return void res.end(
          JSON.stringify({ error: { message: 'injected', type: 'server_error' } }),
        );
      }
      let status = 200;
      let payload: unknown;
      const api =
        path === '/chat/completions' ? 'chat' : path === '/responses' ? 'responses' : undefined;
      if (api !== undefined && req.method === 'POST') {
        const turn = modelTurn(api, (body ?? {}) as Record<string, unknown>);
        payload = replyBody(turn, options.respond(turn), recorded.index);
      } else if (options.route !== undefined) {
        const routed = options.route(recorded);
        status = routed.status ?? 200;
        payload = routed.body;
      } else {
        status = 404;
        payload = {
          error: { message: `No route ${req.method} ${path}`, type: 'invalid_request_error' },
        };
      }
      const bytes = Buffer.from(JSON.stringify(payload));
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length });
      if (fault === 'truncate') {
        res.write(bytes.subarray(0, Math.floor(bytes.length / 2)));
        setTimeout(() => req.socket.destroy(), 5);
        return;
      }
      res.end(bytes);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    inject: (...more) => void faults.push(...more),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
