/**
 * A LangChain `createAgent` support agent whose tools are made idempotent by one middleware:
 * a ticket whose reply is lost is replayed by `toolRetryMiddleware`'s retry, a later-step retry
 * and a parallel duplicate email run once, and a restarted server that re-runs the same turn
 * replays from the durable store.
 *
 * Offline by default (LangChain's own scripted `fakeModel`); a real OpenAI model when
 * OPENAI_API_KEY is set (OPENAI_MODEL, OPENAI_BASE_URL). SQLite store in `.demo-data/`.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { idempotencyOf } from '@idempotent-tools/langchain';
import { idempotentToolsMiddleware } from '@idempotent-tools/langchain/middleware';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
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

/** The agent's tools, as you would write them for LangChain: nothing idempotent about them. */
function supportTools(tickets: Ledger, outbox: Ledger) {
  return [
    tool(async ({ email }) => ({ customerId: 'cus_42', name: 'Ada Lovelace', email }), {
      name: 'lookup_customer',
      description: 'Find a customer by email.',
      schema: z.object({ email: z.string() }),
    }),
    tool(
      async ({ customerId, title }) => {
        await sleep(20); // the ticket service takes a moment
        const ticketId = `T-${String(tickets.entries.length + 1).padStart(4, '0')}`;
        tickets.append({ ticketId, customerId, title });
        return { ticketId, customerId, title, status: 'open' };
      },
      {
        name: 'create_ticket',
        description: 'Open a support ticket for a customer.',
        schema: z.object({ customerId: z.string(), title: z.string() }),
      },
    ),
    tool(
      async ({ to, subject }) => {
        await sleep(10);
        outbox.append({ to, subject });
        return `email "${subject}" sent to ${to}`;
      },
      {
        name: 'send_email',
        description: 'Email a customer.',
        schema: z.object({ to: z.string(), subject: z.string() }),
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

/** LangChain's own scripted chat model: the turn, step by step. */
function scriptedModel(restart: boolean) {
  const ticket = { customerId: 'cus_42', title: 'Cannot log in since the password reset' };
  const email = (messages: BaseMessage[]) => ({
    name: 'send_email',
    args: { to: 'ada@example.com', subject: `Your ticket ${ticketIdIn(messages)}` },
  });
  const model = fakeModel();
  if (!restart) {
    model
      .respond(calls({ name: 'lookup_customer', args: { email: 'ada@example.com' } }))
      .respond(calls({ name: 'create_ticket', args: ticket }))
      // Not sure the ticket went through, the model opens it again, and emails Ada twice.
      .respond((m) => calls({ name: 'create_ticket', args: ticket }, email(m), email(m)));
  } else {
    model.respond(calls({ name: 'create_ticket', args: ticket })).respond((m) => calls(email(m)));
  }
  return model.respond(
    (m) => new AIMessage(`Ticket ${ticketIdIn(m)} is open; Ada has the number.`),
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
  /** Tool results that were replays. */
  replayed: number;
  transcript: string[];
}

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
  const config = { configurable: { thread_id: 'support-thread-1' } };
  const question = new HumanMessage({
    id: 'msg-1', // the id your app stores the message under: the turn id is thread + this id
    content:
      "Ada (ada@example.com) can't log in since her password reset. Open a ticket and email her its number.",
  });
  let replayed = 0;
  const network = flakyNetwork(print);

  const runTurn = async (restart: boolean) => {
    const store = openSqliteStore(join(dir, 'idempotency.sqlite'));
    try {
      const agent = createAgent({
        model: real ? realModel() : scriptedModel(restart),
        tools: supportTools(tickets, outbox),
        systemPrompt: 'You are a support agent. Use the tools, then answer in one sentence.',
        middleware: [
          toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 10 }) as unknown as AgentMiddleware,
          network,
          ...(options.idempotent === false
            ? []
            : [idempotentToolsMiddleware({ store, exclude: ['lookup_customer'] })]),
        ],
      });
      const stream = await agent.stream(
        { messages: [question] },
        { ...config, streamMode: 'updates' },
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
    } finally {
      store.close();
    }
  };

  print(
    `LangChain createAgent, idempotent tools (${real ? `model ${process.env.OPENAI_MODEL ?? 'gpt-4o-mini'}` : 'offline: scripted fakeModel'}; SQLite store in .demo-data/)`,
  );
  print('');
  print(`user: ${question.text}`);
  await runTurn(false);
  print('');
  print(
    'The server restarts; the client sends the same turn again (same thread, same message id):',
  );
  await runTurn(true);

  const result = {
    tickets: tickets.entries.length,
    emails: outbox.entries.length,
    sideEffects: tickets.entries.length + outbox.entries.length,
    replayed,
    transcript,
  };
  print('');
  print(
    `Side effects: ${result.tickets} ticket(s), ${result.emails} email(s); ${replayed} tool results were replays.${real ? '' : ' (Without the middleware: 4 tickets, 3 emails.)'}`,
  );
  return result;
}
