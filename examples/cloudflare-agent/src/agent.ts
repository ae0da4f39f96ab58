/**
 * The Worker of `worker.ts` run offline in workerd (the Cloudflare Workers runtime) through
 * miniflare, bundled as wrangler bundles it (esbuild, the Workers export conditions), with its two
 * Durable Object classes on SQLite storage. Then the requests a chat client sends:
 *
 * 1. Ada's chat asks for a ticket; the reply is lost on the way and the client sends the same
 *    request again: the same chat id and the same messages are the same turn, so the second
 *    request's call of `open_ticket` (a new tool-call id) is **replayed** from the Durable Objects
 *    store, across two requests: one ticket.
 * 2. Bob double-clicks: two identical requests at once. One runs the tool; the other waits for
 *    it (woken by the store's object, no polling) and replays its outcome: one ticket.
 *
 * `main()` returns what each request answered and the help desk's tickets; `problems()` lists
 * what is not one ticket per user message.
 */
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

export interface ChatReply {
  text: string;
  tools: Array<{ tool: string; output: { ticketId: string; replayed?: boolean } }>;
}
export interface Ticket {
  ticketId: string;
  title: string;
  chatId: string;
}

/** The Worker bundled as `wrangler deploy` bundles it. */
export async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [fileURLToPath(new URL('./worker.ts', import.meta.url))],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    target: 'es2022',
    logLevel: 'silent',
  });
  return result.outputFiles[0]?.text ?? '';
}

/** Start the Worker in workerd (as `wrangler dev` does, with the bindings of wrangler.jsonc). */
export async function startWorker(): Promise<Miniflare> {
  return new Miniflare({
    modules: true,
    script: await bundleWorker(),
    compatibilityDate: '2026-07-30',
    compatibilityFlags: ['nodejs_compat'],
    durableObjects: {
      IDEMPOTENCY: { className: 'IdempotencyObject', useSQLite: true },
      TICKETS: { className: 'TicketDesk', useSQLite: true },
    },
  });
}

export async function main(options: { print?: (line: string) => void } = {}) {
  const print = options.print ?? (() => {});
  const worker = await startWorker();
  try {
    const send = async (id: string, text: string): Promise<ChatReply> => {
      const response = await worker.dispatchFetch('http://agent.test/chat', {
        method: 'POST',
        body: JSON.stringify({ id, messages: [{ role: 'user', content: text }] }),
      });
      if (!response.ok) throw new Error(`POST /chat: ${response.status} ${await response.text()}`);
      return (await response.json()) as ChatReply;
    };
    const show = (who: string, reply: ChatReply) => {
      for (const call of reply.tools)
        print(`  ${who}: ${call.tool} -> ${JSON.stringify(call.output)}`);
    };

    print('1. Ada asks for a ticket; the reply is lost, the client sends the same request again');
    const ada = await send('chat-ada', 'My printer is on fire');
    show('first request ', ada);
    const adaRetry = await send('chat-ada', 'My printer is on fire');
    show('second request', adaRetry);

    print('2. Bob double-clicks: two identical requests at once');
    const [bob, bobAgain] = await Promise.all([
      send('chat-bob', 'Reset my password'),
      send('chat-bob', 'Reset my password'),
    ]);
    show('request A', bob);
    show('request B', bobAgain);

    const tickets = (await (
      await worker.dispatchFetch('http://agent.test/tickets')
    ).json()) as Ticket[];
    print(`The help desk has ${tickets.length} tickets:`);
    for (const ticket of tickets) print(`  ${ticket.ticketId} ${ticket.chatId}: ${ticket.title}`);
    return { ada: [ada, adaRetry], bob: [bob, bobAgain], tickets };
  } finally {
    await worker.dispose();
  }
}

/** What is not one ticket per user message, each retried or doubled request replayed. */
export function problems(result: Awaited<ReturnType<typeof main>>): string[] {
  const found: string[] = [];
  for (const chatId of ['chat-ada', 'chat-bob']) {
    const mine = result.tickets.filter((t) => t.chatId === chatId);
    if (mine.length !== 1) found.push(`${chatId} has ${mine.length} tickets, not 1`);
  }
  for (const [who, replies] of Object.entries({ ada: result.ada, bob: result.bob })) {
    const outputs = replies.map((reply) => reply.tools[0]?.output);
    const ids = new Set(outputs.map((output) => output?.ticketId));
    if (ids.size !== 1)
      found.push(`${who}'s two requests answered different tickets: ${[...ids].join(', ')}`);
    const replayed = outputs.filter((output) => output?.replayed === true).length;
    if (replayed !== 1) found.push(`${who}: ${replayed} of the two requests were replayed, not 1`);
  }
  return found;
}
