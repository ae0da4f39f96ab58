/**
 * A LangChain `createAgent` support agent behind a chat backend, whose tools are made idempotent
 * by one middleware. Each request carries the chat id and the messages the client posts; the
 * backend passes the chat id as the graph's `thread_id`, which tells one conversation from
 * another. A ticket whose reply is lost is replayed by `toolRetryMiddleware`'s retry, a
 * later-step retry and a parallel duplicate email run once, a restarted server that re-runs the
 * same turn replays from the durable store, and a second user typing the same words gets their
 * own ticket.
 *
 * Offline by default (LangChain's own scripted `fakeModel`); a real OpenAI model when
 * OPENAI_API_KEY is set (OPENAI_MODEL, OPENAI_BASE_URL). SQLite store in `.demo-data/`.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type IdempotencyStore, idempotencyOf } from '@idempotent-tools/langchain';
import { idempotentToolsMiddleware } from '@idempotent-tools/langchain/middleware';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, ToolMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import {
  type AgentMiddleware,
  createAgent,
  createMiddleware,
  toolRetryMiddleware,
} from 'langchain';
import { z } from 'zod';

/** A side effect with no idempotency of its own: one JSON line per real execution. */
class Ledger {
  constructor(readonly file: string) {}
  get entries(): Array<Record<string, unknown>> {
    if (!existsSync(this.file)) return [];
    return readFileSync(this.file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }
  append(entry: Record<string, unknown>): void {
    appendFileSync(this.file, `${JSON.stringify(entry)}\n`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The signed-in customer of a chat, as the backend's session knows them. */
interface Customer {
  customerId: string;
  name: string;
  email: string;
}
const CUSTOMERS: Record<string, Customer> = {
  'chat-ada': { customerId: 'cus_ada', name: 'Ada Lovelace', email: 'ada@example.com' },
  'chat-bob': { customerId: 'cus_bob', name: 'Bob Babbage', email: 'bob@example.com' },
};
/** The tools act for the chat's customer (the runtime context), not for whom the model names. */
const customerOf = (config: { context?: unknown }) =>
  (config.context as { customer: Customer }).customer;

/** The agent's tools, as you would write them for LangChain: nothing idempotent about them. */
function supportTools(tickets: Ledger, outbox: Ledger) {
  return [
    tool(async (_args, config) => customerOf(config), {
      name: 'lookup_customer',
      description: 'The signed-in customer.',
      schema: z.object({}),
    }),
    tool(
      async ({ title }, config) => {
        await sleep(20); // the ticket service takes a moment
        const { customerId } = customerOf(config);
        const ticketId = `T-${String(tickets.entries.length + 1).padStart(4, '0')}`;
        tickets.append({ ticketId, customerId, title });
        return { ticketId, customerId, title, status: 'open' };
      },
      {
        name: 'create_ticket',
        description: 'Open a support ticket for the signed-in customer.',
        schema: z.object({ title: z.string() }),
      },
    ),
    tool(
      async ({ subject }, config) => {
        await sleep(10);
        const { email } = customerOf(config);
        outbox.append({ to: email, subject });
        return `email "${subject}" sent to ${email}`;
      },
      {
        name: 'send_email',
        description: 'Email the signed-in customer.',
        schema: z.object({ subject: z.string() }),
      },
    ),
  ];
}

/** A flaky network: the first reply of create_ticket is lost on its way back, after it ran. */
function flakyNetwork(print: (line: string) => void): AgentMiddleware {
  let lost = false;
  return createMiddleware({
    name: 'FlakyNetwork',
    wrapToolCall: async (request, handler) => {
      const reply = await handler(request);
      if (!lost && request.toolCall.name === 'create_ticket') {
        lost = true;
        print('  ! the reply of create_ticket was lost (ECONNRESET): toolRetryMiddleware retries');
        throw new Error('ECONNRESET: the reply was lost');
      }
      return reply;
    },
  });
}

type Call = { name: string; args: Record<string, unknown> };
let callIds = 0;
const calls = (...list: Call[]) =>
  new AIMessage({ content: '', tool_calls: list.map((c) => ({ ...c, id: `call_${++callIds}` })) });

/** The last ticket id the model was shown. */
function ticketIdIn(messages: BaseMessage[]): string {
  const reply = messages.findLast((m) => ToolMessage.isInstance(m) && m.name === 'create_ticket');
  return (JSON.parse(reply?.text ?? '{}') as { ticketId?: string }).ticketId ?? 'T-?';
}

/**
 * LangChain's own scripted chat model: the turn, step by step. The first run is the eventful
 * one; later runs (the restarted server, the other user) open the ticket and email it.
 */
function scriptedModel(first: boolean) {
  const ticket = {
    name: 'create_ticket',
    args: { title: 'Cannot log in since the password reset' },
  };
  const email = (messages: BaseMessage[]) => ({
    name: 'send_email',
    args: { subject: `Your ticket ${ticketIdIn(messages)}` },
  });
  const model = fakeModel();
  if (first) {
    model
      .respond(calls({ name: 'lookup_customer', args: {} }))
      .respond(calls(ticket))
      // Not sure the ticket went through, the model opens it again, and emails the customer twice.
      .respond((m) => calls(ticket, email(m), email(m)));
  } else {
    model.respond(calls(ticket)).respond((m) => calls(email(m)));
  }
  return model.respond(
    (m) => new AIMessage(`Ticket ${ticketIdIn(m)} is open; it is in your inbox.`),
  );
}

function realModel(): BaseChatModel {
  return new ChatOpenAI({
    model: process.env.OPENAI_MODEL ?? 'gpt-4o-mini',
    temperature: 0,
    ...(process.env.OPENAI_BASE_URL
      ? { configuration: { baseURL: process.env.OPENAI_BASE_URL } }
      : {}),
  });
}

export interface MainOptions {
  /** Where the transcript goes. @default no output */
  print?: (line: string) => void;
  /** Folder of the SQLite store and the ledgers, emptied first. @default `.demo-data/` */
  dataDir?: string;
  /** Set to false to run the same agent without the middleware and see the duplicates. @default true */
  idempotent?: boolean;
}

export interface MainResult {
  /** Real executions of side effects: tickets + emails. */
  sideEffects: number;
  tickets: number;
  emails: number;
  /** Tickets opened, per customer id. */
  ticketsBy: Record<string, number>;
  /** Emails sent, per address. */
  emailsTo: Record<string, number>;
  /** Tool results that were replays. */
  replayed: number;
  /**
   * The same offline run without the middleware (in `without-middleware/` of the data folder),
   * run after this one to count the duplicates the middleware prevents. Absent with a real model
   * and in the run without the middleware itself.
   */
  withoutMiddleware?: Pick<MainResult, 'ticketsBy' | 'emailsTo' | 'sideEffects'>;
  transcript: string[];
}

const PROMPT = "I can't log in since my password reset. Open a ticket and email me its number.";

export async function main(options: MainOptions = {}): Promise<MainResult> {
  callIds = 0;
  const transcript: string[] = [];
  const print = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const dir = options.dataDir ?? fileURLToPath(new URL('../.demo-data/', import.meta.url));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const tickets = new Ledger(join(dir, 'tickets.jsonl'));
  const outbox = new Ledger(join(dir, 'outbox.jsonl'));
  const real = Boolean(process.env.OPENAI_API_KEY);
  let replayed = 0;
  const network = flakyNetwork(print);

  /**
   * The chat backend: one request of a chat client (the chat id, the messages so far as the
   * client posts them: no ids).
   */
  const handleChat = async (
    store: IdempotencyStore,
    first: boolean,
    request: { chatId: string; messages: Array<{ role: 'user'; content: string }> },
  ) => {
    const agent = createAgent({
      model: real ? realModel() : scriptedModel(first),
      tools: supportTools(tickets, outbox),
      systemPrompt: `You are a support agent. It is ${new Date().toISOString()}. Use the tools, then answer in one sentence.`,
      middleware: [
        toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 10 }) as unknown as AgentMiddleware,
        network,
        ...(options.idempotent === false
          ? []
          : [idempotentToolsMiddleware({ store, exclude: ['lookup_customer'] })]),
      ],
    });
    const stream = await agent.stream(
      { messages: request.messages },
      {
        configurable: { thread_id: request.chatId }, // what tells this conversation from another
        context: { customer: CUSTOMERS[request.chatId] },
        streamMode: 'updates',
      },
    );
    for await (const update of stream) {
      for (const node of Object.values(update) as Array<{ messages?: BaseMessage[] }>) {
        for (const message of node?.messages ?? []) {
          if (AIMessage.isInstance(message) && (message.tool_calls?.length ?? 0) > 0) {
            for (const c of message.tool_calls ?? []) {
              print(`model -> ${c.name} ${JSON.stringify(c.args)}  [${c.id}]`);
            }
          } else if (AIMessage.isInstance(message)) {
            print(`model: ${message.text}`);
          } else if (ToolMessage.isInstance(message)) {
            const meta = idempotencyOf(message);
            if (meta?.replayed) replayed++;
            const how = meta === undefined ? 'read-only' : meta.replayed ? 'REPLAYED' : 'ran';
            print(`  ${message.name}: ${message.text}  [${message.tool_call_id}, ${how}]`);
          }
        }
      }
    }
  };
  /** One server process (its own connection to the SQLite file) serving one request. */
  const serve = async (first: boolean, chatId: string) => {
    const store = openSqliteStore(join(dir, 'idempotency.sqlite'));
    try {
      await handleChat(store, first, { chatId, messages: [{ role: 'user', content: PROMPT }] });
    } finally {
      store.close();
    }
  };

  print(
    `LangChain createAgent, idempotent tools (${real ? `model ${process.env.OPENAI_MODEL ?? 'gpt-4o-mini'}` : 'offline: scripted fakeModel'}; SQLite store in .demo-data/)`,
  );
  print('');
  print(`Ada (thread_id chat-ada): ${PROMPT}`);
  await serve(true, 'chat-ada');
  print('');
  print("The server restarts; Ada's client sends the same turn again (same chat, same message):");
  await serve(false, 'chat-ada');
  print('');
  print(`Bob (thread_id chat-bob), another user, types the same words: ${PROMPT}`);
  await serve(false, 'chat-bob');

  const count = (entries: Array<Record<string, unknown>>, field: string) => {
    const counts: Record<string, number> = {};
    for (const entry of entries)
      counts[String(entry[field])] = (counts[String(entry[field])] ?? 0) + 1;
    return counts;
  };
  const result: MainResult = {
    tickets: tickets.entries.length,
    emails: outbox.entries.length,
    sideEffects: tickets.entries.length + outbox.entries.length,
    ticketsBy: count(tickets.entries, 'customerId'),
    emailsTo: count(outbox.entries, 'to'),
    replayed,
    transcript,
  };
  print('');
  print(
    `Side effects: ${result.tickets} ticket(s) ${JSON.stringify(result.ticketsBy)}, ${result.emails} email(s) ${JSON.stringify(result.emailsTo)}; ${replayed} tool results were replays.`,
  );
  if (!real && options.idempotent !== false) {
    // The very same scripted run without the middleware (a real model would not repeat itself
    // the same way, and costs money): what it would have done.
    const without = await main({ dataDir: join(dir, 'without-middleware'), idempotent: false });
    result.withoutMiddleware = {
      ticketsBy: without.ticketsBy,
      emailsTo: without.emailsTo,
      sideEffects: without.sideEffects,
    };
    print(
      `The same run without the middleware: ${without.tickets} ticket(s) ${JSON.stringify(without.ticketsBy)}, ${without.emails} email(s) ${JSON.stringify(without.emailsTo)}: ${without.sideEffects - result.sideEffects} duplicate side effect(s) prevented.`,
    );
  }
  return result;
}

/**
 * What `npm start` (and the root `pnpm demo`, through it) checks: one ticket and one email each
 * for Ada and Bob. A side effect that ran twice, one that is missing (Bob handed Ada's ticket,
 * replayed, has none of his own) or one for someone else is a problem; `[]` when all is well.
 */
export function problems(result: Pick<MainResult, 'ticketsBy' | 'emailsTo'>): string[] {
  return [
    ...compare('ticket', result.ticketsBy, { cus_ada: 1, cus_bob: 1 }),
    ...compare('email', result.emailsTo, { 'ada@example.com': 1, 'bob@example.com': 1 }),
  ];
}

function compare(what: string, actual: Record<string, number>, expected: Record<string, number>) {
  const found: string[] = [];
  for (const who of Object.keys({ ...expected, ...actual })) {
    const want = expected[who] ?? 0;
    const got = actual[who] ?? 0;
    if (got > want) found.push(`${what} for ${who}: ${got}, expected ${want}`);
    else if (got < want)
      found.push(`${what} for ${who} is missing (or was replayed from another user's)`);
  }
  return found;
}
