// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
/**
 * A local OpenAI-compatible HTTP server (node:http on 127.0.0.1, random port) that plays a
 * scripted model for Chat Completions and Responses, and injects what agents meet on real
 * networks: a connection dropped after the request arrived, a timeout, a truncated body, a 5xx.
 * Point the real `openai` client at it: `new OpenAI({ baseURL: server.baseURL, apiKey: 'test' })`.
 * Requests with `stream: true` are answered as server-sent events in each API's own event
 * format (Chat Completions chunks and `[DONE]`; Responses `response.*` events), so streaming
 * clients (`@ai-sdk/openai`, `@langchain/openai`, the Agents SDK) run against it too.
 * Responses keeps state as the API does: a request with `previous_response_id` continues the
 * stored conversation of that response (an unknown id is a 400), `POST /conversations` creates a
 * conversation and a request with `conversation` adds its input and output to it; the scripted
 * model sees the whole conversation.
 */
import { randomUUID } from 'node:crypto';
import { type ScriptedRequest, startScriptedHttp } from './http.js';

/**
 * - `drop`: the request arrives, then the connection is closed without a response (the SDK retries).
 * - `timeout`: the request arrives and is never answered (the client's timeout fires; the SDK retries).
 * - `truncate`: the reply is generated and half of its body sent (half of the events of a
 *   stream: a broken stream), then the connection is cut (the SDK throws `TypeError: terminated`;
 *   the app must retry).
 * - `{ status }`: an HTTP error with that status (the SDK retries 408, 409, 429 and 5xx).
 */
export type Fault = 'drop' | 'timeout' | 'truncate' | { status: number };

/** What the scripted model sees of one request. */
export interface ModelTurn {
  api: 'chat' | 'responses';
  /** The parsed request body. */
  body: Record<string, unknown>;
  /**
   * The conversation the model answers: the messages / input items of the request, after the
   * stored items of its `previous_response_id` or `conversation` (Responses).
   */
  items: Array<Record<string, unknown>>;
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

/** One request as the server received it (its path without the `/v1` prefix). */
export type RecordedRequest = ScriptedRequest<Fault>;

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

/** The messages / input items of a request body (a string input is one user message). */
function requestItems(api: ModelTurn['api'], body: Record<string, unknown>): Message[] {
  const raw = api === 'chat' ? body.messages : body.input;
  return typeof raw === 'string' ? [{ role: 'user', content: raw }] : ((raw ?? []) as Message[]);
}

function modelTurn(
  api: ModelTurn['api'],
  body: Record<string, unknown>,
  items: Message[] = requestItems(api, body),
): ModelTurn {
  const lastUser = items.findLastIndex((m) => m.role === 'user');
  const after = items.slice(lastUser + 1);
  const toolOutputs =
    api === 'chat'
      ? after.filter((m) => m.role === 'tool').map((m) => text(m.content))
      : after.filter((m) => m.type === 'function_call_output').map((m) => text(m.output));
  return {
    api,
    body,
    items: items as Array<Record<string, unknown>>,
    userText: lastUser < 0 ? '' : text(items[lastUser]?.content),
    toolOutputs,
  };
}

function replyBody(turn: ModelTurn, reply: ScriptedReply, id: string): unknown {
  const calls = (reply.toolCalls ?? []).map((c) => ({
    id: `call_${randomUUID().slice(0, 8)}`,
    name: c.name,
    arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments),
  }));
  const model = String(turn.body.model ?? 'scripted');
  const created = Math.floor(Date.now() / 1000);
  if (turn.api === 'chat') {
    return {
      id: `chatcmpl-${id}`,
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
      id: `msg_${id}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: reply.content, annotations: [] }],
    });
  }
  const conversation = conversationOf(turn.body);
  return {
    id: `resp_${id}`,
    object: 'response',
    previous_response_id: turn.body.previous_response_id ?? null,
    conversation: conversation === undefined ? null : { id: conversation },
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

/** The conversation id of a Responses request (`conversation: 'conv_…'` or `{ id }`). */
function conversationOf(body: Record<string, unknown>): string | undefined {
  const conversation = body.conversation as string | { id?: string } | null | undefined;
  return typeof conversation === 'string' ? conversation : (conversation?.id ?? undefined);
}

/** One server-sent event. */
const sse = (data: unknown, event?: string) =>
  `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;

/** The events of a streamed reply, in the API's own format. */
function streamEvents(api: ModelTurn['api'], reply: Record<string, unknown>): string[] {
  if (api === 'chat') {
    const { choices, usage, ...head } = reply as {
      choices: Array<{ message: { content: string | null; tool_calls?: unknown[] } }>;
      usage: unknown;
    } & Record<string, unknown>;
    const base = { ...head, object: 'chat.completion.chunk' };
    const message = choices[0]?.message ?? { content: null };
    const chunk = (delta: unknown, finish: string | null = null) =>
      sse({ ...base, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] });
    const events = [chunk({ role: 'assistant', content: '' })];
    if (message.content) {
      // Two deltas, so a cut in the middle leaves a half-written answer.
      const half = Math.ceil(message.content.length / 2);
      events.push(chunk({ content: message.content.slice(0, half) }));
      events.push(chunk({ content: message.content.slice(half) }));
    }
    for (const [index, call] of (message.tool_calls ?? []).entries()) {
      events.push(chunk({ tool_calls: [{ index, ...(call as object) }] }));
    }
    events.push(chunk({}, message.tool_calls === undefined ? 'stop' : 'tool_calls'));
    events.push(sse({ ...base, choices: [], usage }));
    events.push('data: [DONE]\n\n');
    return events;
  }
  const response = reply as { output: Array<Record<string, unknown>> } & Record<string, unknown>;
  let sequence = 0;
  const event = (type: string, data: Record<string, unknown>) =>
    sse({ type, sequence_number: sequence++, ...data }, type);
  const events = [
    event('response.created', { response: { ...response, status: 'in_progress', output: [] } }),
  ];
  for (const [output_index, item] of response.output.entries()) {
    if (item.type === 'function_call') {
      events.push(
        event('response.output_item.added', {
          output_index,
          item: { ...item, arguments: '', status: 'in_progress' },
        }),
      );
      events.push(
        event('response.function_call_arguments.delta', {
          item_id: item.id,
          output_index,
          delta: item.arguments,
        }),
      );
      events.push(
        event('response.function_call_arguments.done', {
          item_id: item.id,
          output_index,
          arguments: item.arguments,
        }),
      );
    } else {
      const part = (item.content as Array<{ text: string }>)[0] as { text: string };
      events.push(
        event('response.output_item.added', {
          output_index,
          item: { ...item, content: [], status: 'in_progress' },
        }),
      );
      events.push(
        event('response.content_part.added', {
          item_id: item.id,
          output_index,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
      );
      events.push(
        event('response.output_text.delta', {
          item_id: item.id,
          output_index,
          content_index: 0,
          delta: part.text,
        }),
      );
      events.push(
        event('response.output_text.done', {
          item_id: item.id,
          output_index,
          content_index: 0,
          text: part.text,
        }),
      );
      events.push(
        event('response.content_part.done', {
          item_id: item.id,
          output_index,
          content_index: 0,
          part,
        }),
      );
    }
    events.push(event('response.output_item.done', { output_index, item }));
  }
  events.push(event('response.completed', { response }));
  return events;
}

/** Start the server; close it when done. */
export async function startScriptedServer(options: ScriptedServerOptions): Promise<ScriptedServer> {
  // Responses state: the items of each response (its conversation up to its output), and of
  // each conversation of the Conversations API.
  const responses = new Map<string, Message[]>();
  const conversations = new Map<string, Message[]>();
  const tag = randomUUID().slice(0, 8);
  const invalid = (message: string, param: string) => ({
    status: 400,
    payload: { error: { message, type: 'invalid_request_error', param, code: null } },
  });
  const { origin, ...server } = await startScriptedHttp<Fault>({
    faults: options.faults,
    path: (url) => url.replace(/^\/v1/, ''),
    injected: () => ({ error: { message: 'injected', type: 'server_error' } }),
    contentLength: true,
    handle: (recorded, reply) => {
      const { method, path, body } = recorded;
      let status = 200;
      let payload: unknown;
      const api =
        path === '/chat/completions' ? 'chat' : path === '/responses' ? 'responses' : undefined;
      const request = (body ?? {}) as Record<string, unknown>;
      const previous = api === 'responses' ? request.previous_response_id : undefined;
      const conversation = api === 'responses' ? conversationOf(request) : undefined;
      const history =
        typeof previous === 'string'
          ? responses.get(previous)
          : conversation === undefined
            ? []
            : conversations.get(conversation);
      if (api !== undefined && method === 'POST' && history === undefined) {
        ({ status, payload } =
          typeof previous === 'string'
            ? invalid(`Previous response with id '${previous}' not found.`, 'previous_response_id')
            : invalid(`Conversation with id '${conversation}' not found.`, 'conversation'));
      } else if (api !== undefined && method === 'POST') {
        const items = [...(history ?? []), ...requestItems(api, request)];
        const turn = modelTurn(api, request, items);
        payload = replyBody(turn, options.respond(turn), `${tag}_${recorded.index}`);
        if (api === 'responses') {
          const answer = payload as { id: string; output: Message[] };
          const after = [...items, ...answer.output];
          responses.set(answer.id, after);
          if (conversation !== undefined) conversations.set(conversation, after);
        }
        if (turn.body.stream === true) {
          const events = streamEvents(api, payload as Record<string, unknown>);
          return reply.events(events, { connection: 'keep-alive' });
        }
      } else if (path === '/conversations' && method === 'POST') {
        const id = `conv_${tag}_${recorded.index}`;
        conversations.set(id, requestItems('responses', { input: request.items ?? [] }));
        payload = {
          id,
          object: 'conversation',
          created_at: Math.floor(Date.now() / 1000),
          metadata: request.metadata ?? {},
        };
      } else if (options.route !== undefined) {
        const routed = options.route(recorded);
        status = routed.status ?? 200;
        payload = routed.body;
      } else {
        status = 404;
        payload = {
          error: { message: `No route ${method} ${path}`, type: 'invalid_request_error' },
        };
      }
      reply.json(status, payload);
    },
  });
  return { baseURL: `${origin}/v1`, ...server };
}
