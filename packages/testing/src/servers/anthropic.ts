// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
/**
 * A local Anthropic Messages API server (node:http on 127.0.0.1, random port) that plays a
 * scripted model, and injects what agents meet on real networks: a connection dropped after the
 * request arrived, a timeout, a reply cut mid-body or a stream broken mid-events, a 5xx.
 * Point the real `@anthropic-ai/sdk` client at it:
 * `new Anthropic({ apiKey: 'test', baseURL: server.baseURL })`.
 *
 * `POST /v1/messages` answers a `Message` as JSON, or with `stream: true` as server-sent events
 * in the API's own format (`message_start`, `content_block_start`, `content_block_delta` with
 * `text_delta` / `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`).
 * Message threads are kept as the API keeps them: `thread: { type: 'create' }` stores the
 * conversation, its `system` and `tools` under the reply's id, `thread: { type: 'continue',
 * previous_message_id }` continues it (an unknown id is a 404 `thread_not_found`), so the SDK's
 * tool runner, which threads by default, runs against it. The scripted model sees the whole
 * conversation.
 */
import { randomUUID } from 'node:crypto';
import { type ScriptedRequest, startScriptedHttp } from './http.js';

/**
 * - `drop`: the request arrives, then the connection is closed without a response (the SDK
 *   retries it, `maxRetries`).
 * - `timeout`: the request arrives and is never answered (the client's timeout fires; it retries).
 * - `truncate`: the reply is generated and half of its body sent (half of the events of a
 *   stream: a broken stream), then the connection is cut (the SDK throws; the app must retry).
 * - `{ status }`: an HTTP error with that status (the SDK retries 408, 409, 429 and 5xx).
 */
export type Fault = 'drop' | 'timeout' | 'truncate' | { status: number };

type Block = { type: string; [field: string]: unknown };
type Message = { role: string; content: string | Block[] };

/** What the scripted model sees of one request. */
export interface ModelTurn {
  /** The parsed request body. */
  body: Record<string, unknown>;
  /** The whole conversation: a thread's stored messages, then the request's `messages`. */
  messages: Message[];
  /** The `system` prompt, as text (a thread's, on a `continue`). */
  system: string;
  /** The text of the last message the user wrote (tool results left out). */
  userText: string;
  /** The `tool_result` contents sent after that message, in order, as text. */
  toolResults: string[];
  /** Whether each of those tool results is an error (`is_error: true`). */
  toolErrors: boolean[];
}

/**
 * The scripted model's answer: text and/or tool calls (each gets a fresh `toolu_` id). An
 * `input` given as a string is sent as it is (not JSON-encoded): a malformed call.
 */
export interface ScriptedReply {
  text?: string;
  toolUses?: Array<{ name: string; input: Record<string, unknown> | string }>;
}

/** One request as the server received it (its path without the query). */
export type RecordedRequest = ScriptedRequest<Fault>;

export interface ScriptedServerOptions {
  /** The scripted model. */
  respond: (turn: ModelTurn) => ScriptedReply;
  /** Faults for the coming requests, in arrival order (`undefined`: answer normally). @default [] */
  faults?: Array<Fault | undefined>;
}

export interface ScriptedServer {
  /** e.g. `http://127.0.0.1:53117` (the SDK adds `/v1/messages`). */
  baseURL: string;
  /** Every request received, faulted or not. */
  requests: RecordedRequest[];
  /** Queue faults for the next requests. */
  inject(...faults: Array<Fault | undefined>): void;
  close(): Promise<void>;
}

const blocks = (content: Message['content'] | undefined): Block[] =>
  typeof content === 'string' ? [{ type: 'text', text: content }] : (content ?? []);

const text = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((b) => (b as { text?: string }).text ?? '').join('')
      : '';

function modelTurn(body: Record<string, unknown>, messages: Message[], system: unknown): ModelTurn {
  const authored = (m: Message) =>
    m.role === 'user' && blocks(m.content).some((b) => b.type !== 'tool_result');
  const last = messages.findLastIndex(authored);
  const results = messages
    .slice(last + 1)
    .filter((m) => m.role === 'user')
    .flatMap((m) => blocks(m.content).filter((b) => b.type === 'tool_result'));
  const said = last < 0 ? [] : blocks(messages[last]?.content);
  return {
    body,
    messages,
    system: text(system),
    userText: text(said.filter((b) => b.type !== 'tool_result')),
    toolResults: results.map((b) => text(b.content)),
    toolErrors: results.map((b) => b.is_error === true),
  };
}

function replyMessage(turn: ModelTurn, reply: ScriptedReply, id: string) {
  const content: Block[] = [];
  if (reply.text !== undefined) content.push({ type: 'text', text: reply.text, citations: null });
  for (const use of reply.toolUses ?? []) {
    const toolId = `toolu_${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    content.push({
      type: 'tool_use',
      id: toolId,
      name: use.name,
      input: use.input,
      caller: { type: 'direct' },
    });
  }
  return {
    id: `msg_${id}`,
    type: 'message',
    role: 'assistant',
    model: String(turn.body.model ?? 'scripted'),
    content,
    stop_reason: (reply.toolUses ?? []).length > 0 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    container: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  };
}

const sse = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

/** The events of a streamed reply, in the Messages API's format. */
function streamEvents(message: ReturnType<typeof replyMessage>): string[] {
  const { content, stop_reason, stop_sequence, usage, ...head } = message;
  const events = [
    sse('message_start', {
      message: { ...head, content: [], stop_reason: null, stop_sequence: null, usage },
    }),
  ];
  for (const [index, block] of content.entries()) {
    if (block.type === 'text') {
      const full = String(block.text);
      const half = Math.ceil(full.length / 2); // two deltas: a cut leaves half an answer
      events.push(sse('content_block_start', { index, content_block: { ...block, text: '' } }));
      for (const part of [full.slice(0, half), full.slice(half)]) {
        events.push(
          sse('content_block_delta', { index, delta: { type: 'text_delta', text: part } }),
        );
      }
    } else {
      const json = typeof block.input === 'string' ? block.input : JSON.stringify(block.input);
      const half = Math.ceil(json.length / 2);
      events.push(sse('content_block_start', { index, content_block: { ...block, input: {} } }));
      for (const part of [json.slice(0, half), json.slice(half)]) {
        const delta = { type: 'input_json_delta', partial_json: part };
        events.push(sse('content_block_delta', { index, delta }));
      }
    }
    events.push(sse('content_block_stop', { index }));
  }
  events.push(sse('message_delta', { delta: { stop_reason, stop_sequence }, usage }));
  events.push(sse('message_stop', {}));
  return events;
}

type Thread = { messages: Message[]; system: unknown; tools: unknown };

/** Start the server; close it when done. */
export async function startScriptedServer(options: ScriptedServerOptions): Promise<ScriptedServer> {
  const threads = new Map<string, Thread>(); // by the id of the reply a thread continues from
  const tag = randomUUID().slice(0, 8);
  const errorBody = (type: string, message: string, details?: unknown) => ({
    type: 'error',
    error: { type, message, ...(details === undefined ? {} : { details }) },
  });
  const { origin, ...server } = await startScriptedHttp<Fault>({
    faults: options.faults,
    path: (url) => url.replace(/\?.*$/, ''),
    injected: () => errorBody('api_error', 'injected'),
    handle: ({ index, method, path, body }, reply) => {
      if (path !== '/v1/messages' || method !== 'POST') {
        return reply.json(404, errorBody('not_found_error', `No route ${method} ${path}`));
      }
      const request = (body ?? {}) as Record<string, unknown>;
      const thread = request.thread as { type: string; previous_message_id?: string } | undefined;
      const previous =
        thread?.type === 'continue' ? threads.get(String(thread.previous_message_id)) : undefined;
      if (thread?.type === 'continue' && previous === undefined) {
        const details = { error_code: 'thread_not_found' };
        return reply.json(404, errorBody('not_found_error', 'Thread not found.', details));
      }
      const state: Thread = {
        messages: [...(previous?.messages ?? []), ...((request.messages ?? []) as Message[])],
        system: previous?.system ?? request.system,
        tools: previous?.tools ?? request.tools,
      };
      const turn = modelTurn(request, state.messages, state.system);
      const message = replyMessage(turn, options.respond(turn), `${tag}_${index}`);
      if (thread !== undefined) {
        const answer = { role: 'assistant', content: message.content };
        threads.set(message.id, { ...state, messages: [...state.messages, answer] });
      }
      if (request.stream !== true) return reply.json(200, message);
      reply.events(streamEvents(message));
    },
  });
  return { baseURL: origin, ...server };
}
