import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';

/** The body `useChat` (its `DefaultChatTransport`) posts to the route, plus the app's extras. */
export interface ChatRequest {
  id: string;
  messages: UIMessage[];
  trigger: 'submit-message' | 'regenerate-message';
  messageId?: string;
  [extra: string]: unknown;
}

export interface ChatApp {
  /** The route's URL (`POST` a `ChatRequest`). */
  api: string;
  /** What the route handler threw, or its response stream broke with: the server's log. */
  serverErrors: unknown[];
  close(): Promise<void>;
}

/**
 * A chat route on 127.0.0.1 (node:http), as a Next.js route handler would run it: the handler
 * gets the parsed body and returns a web `Response` (e.g. `result.toUIMessageStreamResponse()`).
 * A handler that throws gets a 500; a response stream that errors is cut, as a server would.
 */
export async function startChatApp(
  handle: (request: ChatRequest) => Promise<Response> | Response,
): Promise<ChatApp> {
  const serverErrors: unknown[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let response: Response;
    try {
      response = await handle(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest);
    } catch (error) {
      serverErrors.push(error);
      res.writeHead(500, { 'content-type': 'text/plain' });
      return void res.end(error instanceof Error ? error.message : String(error));
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    try {
      for await (const chunk of response.body ?? []) res.write(chunk);
      res.end();
    } catch (error) {
      serverErrors.push(error);
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    api: `http://127.0.0.1:${port}/api/chat`,
    serverErrors,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The outcome of one request of a chat: the assistant message as the client assembled it. */
export interface Exchange {
  message: UIMessage | undefined;
  /** Errors the client met reading the stream (an `error` chunk, a broken connection). */
  errors: unknown[];
}

/**
 * One `useChat` chat, driven in Node the way `useChat` drives it: its `DefaultChatTransport`
 * posts `{ id, messages, trigger, messageId }` to the route; the reply's chunks are read with
 * `readUIMessageStream`; the answer joins the chat's messages.
 */
export class Chat {
  readonly messages: UIMessage[] = [];
  private readonly transport: DefaultChatTransport<UIMessage>;

  constructor(
    api: string,
    readonly id: string = randomUUID(),
    /** Extra body fields the app sends (e.g. `{ system }`). */
    private readonly body: Record<string, unknown> = {},
  ) {
    this.transport = new DefaultChatTransport({ api });
  }

  /**
   * `sendMessage({ text })` (or `sendMessage({ parts })`): a new user message (a fresh message id).
   */
  send(text: string | UIMessage['parts'], body: Record<string, unknown> = {}): Promise<Exchange> {
    const parts: UIMessage['parts'] = typeof text === 'string' ? [{ type: 'text', text }] : text;
    this.messages.push({ id: randomUUID(), role: 'user', parts });
    return this.request('submit-message', undefined, body);
  }

  /**
   * `sendMessage()` without a message: the chat as it is, e.g. after `addToolApprovalResponse`
   * (what `sendAutomaticallyWhen` sends).
   */
  submit(body: Record<string, unknown> = {}): Promise<Exchange> {
    return this.request('submit-message', undefined, body);
  }

  /** `regenerate()`: the last assistant message is dropped and the same turn is sent again. */
  regenerate(body: Record<string, unknown> = {}): Promise<Exchange> {
    const last = this.messages.at(-1);
    if (last?.role === 'assistant') this.messages.pop();
    return this.request(
      'regenerate-message',
      last?.role === 'assistant' ? last.id : undefined,
      body,
    );
  }

  private async request(
    trigger: ChatRequest['trigger'],
    messageId: string | undefined,
    body: Record<string, unknown>,
  ): Promise<Exchange> {
    const stream = await this.transport.sendMessages({
      chatId: this.id,
      messages: [...this.messages],
      trigger,
      messageId,
      abortSignal: undefined,
      body: { ...this.body, ...body },
    });
    const errors: unknown[] = [];
    let message: UIMessage | undefined;
    for await (const state of readUIMessageStream({ stream, onError: (e) => errors.push(e) })) {
      message = state;
    }
    if (message !== undefined) {
      message = { ...message, id: message.id === '' ? randomUUID() : message.id };
      this.messages.push(message);
    }
    return { message, errors };
  }
}

/** The outputs of the tool parts of an assistant message. */
export function toolOutputs(message: UIMessage | undefined): unknown[] {
  return (message?.parts ?? []).flatMap((part) =>
    part.type.startsWith('tool-') && 'output' in part && part.state === 'output-available'
      ? [part.output]
      : [],
  );
}

/** The text of an assistant message. */
export function textOf(message: UIMessage | undefined): string {
  return (message?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
}
