/**
 * An AI SDK agent (the real `generateText` tool loop) behind a chat route: each request carries
 * the chat id and the conversation's messages, as `useChat` sends them, and the route wraps the
 * tools per request with `idempotentTools(tools, { store, conversationId: id })`.
 *
 * What it shows: a retried charge is replayed, a parallel duplicate receipt is sent once, a
 * restarted server that re-runs the same conversation replays from the durable store, and a
 * second user (another chat) who sends the very same words gets their own charge, not the first
 * user's replayed.
 *
 * Offline by default (a scripted mock model); a real OpenAI model when OPENAI_API_KEY is set.
 * SQLite store by default; Redis when REDIS_URL is set.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openai } from '@ai-sdk/openai';
import { type IdempotencyStore, idempotentTools } from '@idempotent-tools/ai-sdk';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { generateText, isStepCount, type LanguageModel, type ModelMessage, tool } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { Redis } from 'ioredis';
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

/** The signed-in user of a request (from the session cookie, in a real app). */
interface User {
  name: string;
  email: string;
  orderId: string;
}

/**
 * The agent's tools, as you would write them for the AI SDK. They act for the signed-in user,
 * so two users' calls can have the very same arguments (`charge_card({ amount: 1999 })`).
 */
function shopTools(user: User, payments: Ledger, outbox: Ledger) {
  return {
    lookup_order: tool({
      description: "Look up the user's open order: its id and amount due, in cents.",
      inputSchema: z.object({}),
      execute: async () => ({ orderId: user.orderId, amountDue: 1999 }),
    }),
    charge_card: tool({
      description: "Charge the user's card on file for their open order.",
      inputSchema: z.object({ amount: z.number().int() }),
      execute: async ({ amount }) => {
        await new Promise((resolve) => setTimeout(resolve, 20)); // the vendor takes a moment
        const chargeId = `ch_${String(payments.entries.length + 1).padStart(4, '0')}`;
        payments.append({ chargeId, user: user.name, orderId: user.orderId, amount });
        return { chargeId, orderId: user.orderId, amount, status: 'succeeded' };
      },
    }),
    send_receipt: tool({
      description: 'Email the receipt of a charge to the user.',
      inputSchema: z.object({ chargeId: z.string() }),
      execute: async ({ chargeId }) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        outbox.append({ to: user.email, chargeId });
        return `receipt for ${chargeId} sent to ${user.email}`;
      },
    }),
  };
}

type Calls = Array<{ tool: string; input: Record<string, unknown> }>;

/** A scripted model (the AI SDK's own MockLanguageModelV4): each step's tool calls, then text. */
function scriptedModel(steps: Calls[], finalText: string): LanguageModel {
  let step = 0;
  let callId = 0;
  const usage = {
    inputTokens: { total: 0, noCache: 0, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 0, text: 0, reasoning: undefined },
  };
  const next = () => {
    const calls = steps[step++];
    if (calls === undefined) {
      return {
        content: [{ type: 'text' as const, text: finalText }],
        finishReason: { unified: 'stop' as const, raw: undefined },
      };
    }
    return {
      // A new tool-call id on every call, as a real provider does on a retry.
      content: calls.map((call) => ({
        type: 'tool-call' as const,
        toolCallId: `call_${++callId}`,
        toolName: call.tool,
        input: JSON.stringify(call.input),
      })),
      finishReason: { unified: 'tool-calls' as const, raw: undefined },
    };
  };
  return new MockLanguageModelV4({
    doGenerate: async () => ({ ...next(), usage, warnings: [] }),
    doStream: async () => {
      const { content, finishReason } = next();
      return {
        stream: convertArrayToReadableStream([
          { type: 'stream-start' as const, warnings: [] },
          ...content,
          { type: 'finish' as const, finishReason, usage },
        ] as never[]),
      };
    },
  });
}

/** What both users type, word for word. */
const PROMPT = 'Please charge my open order and email me the receipt.';
const charge = { tool: 'charge_card', input: { amount: 1999 } };
const receipt = (chargeId: string) => ({ tool: 'send_receipt', input: { chargeId } });

export interface AgentResult {
  /** Real executions of side effects (charges + receipts). */
  sideEffects: number;
  /** Real charges, per user. */
  charges: Record<string, number>;
  receipts: number;
  /** Receipts sent, per address. */
  receiptsTo: Record<string, number>;
  /** Tool results the models saw marked `replayed: true`. */
  replayed: number;
  transcript: string[];
}

export async function main(
  options: { print?: (line: string) => void; dataDir?: string } = {},
): Promise<AgentResult> {
  const transcript: string[] = [];
  const say = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const dir = options.dataDir ?? fileURLToPath(new URL('../.demo-data/', import.meta.url));
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const payments = new Ledger(join(dir, 'payments.jsonl'));
  const outbox = new Ledger(join(dir, 'outbox.jsonl'));
  const realModel = process.env.OPENAI_API_KEY !== undefined && process.env.OPENAI_API_KEY !== '';
  const redisUrl = process.env.REDIS_URL;

  const redis = redisUrl ? new Redis(redisUrl) : undefined;
  // A fresh key prefix per run of the example, as the SQLite file is deleted per run.
  const prefix = `ai-sdk-agent:${Date.now()}:`;
  const openStore = (): IdempotencyStore =>
    redis !== undefined
      ? createRedisStore(redis, { prefix })
      : openSqliteStore(join(dir, 'idempotency.sqlite'));

  say('AI SDK agent with idempotent tools, behind a chat route');
  say(
    `  model: ${realModel ? `OpenAI ${process.env.OPENAI_MODEL ?? 'gpt-4o-mini'}` : 'scripted mock (offline)'}; store: ${redis ? 'Redis' : 'SQLite (.demo-data/idempotency.sqlite)'}`,
  );
  let replayed = 0;

  /**
   * One server process handling one chat request, as a route handler would: `id` is the chat id
   * the client (`useChat`) sends with the messages; the tools are wrapped per request with it.
   */
  const handleChatRequest = async (
    request: { id: string; messages: ModelMessage[]; user: User },
    script: Calls[],
  ) => {
    const store = openStore();
    const tools = idempotentTools(shopTools(request.user, payments, outbox), {
      store,
      conversationId: request.id, // the chat id: what tells this conversation from another
      exclude: ['lookup_order'], // read-only: no record needed
    });
    const model = realModel
      ? openai(process.env.OPENAI_MODEL ?? 'gpt-4o-mini')
      : scriptedModel(script, 'Your order is charged and the receipt is on its way.');
    const result = await generateText({
      model,
      tools,
      instructions: `You are a billing assistant for ${request.user.name}. Use the tools; be brief.`,
      messages: request.messages,
      stopWhen: isStepCount(8),
    });
    for (const [i, step] of result.steps.entries()) {
      for (const part of step.content) {
        if (part.type === 'tool-call') {
          const call = `${part.toolName}(${JSON.stringify(part.input)})`;
          say(`  step ${i + 1}  model -> ${call}  [${part.toolCallId}]`);
        } else if (part.type === 'tool-result') {
          const output = part.output as { replayed?: unknown };
          if (output?.replayed === true) replayed++;
          say(`          tool  <- ${JSON.stringify(part.output)}  [${part.toolCallId}]`);
        } else if (part.type === 'tool-error') {
          say(`          tool  x  ${String(part.error)}  [${part.toolCallId}]`);
        }
      }
    }
    say(`  model: ${result.text}`);
    await store.close?.();
  };

  const ada: User = { name: 'Ada', email: 'ada@example.com', orderId: 'ord_1001' };
  const bob: User = { name: 'Bob', email: 'bob@example.com', orderId: 'ord_2002' };
  const adaChat = { id: 'chat_ada_7f3a', messages: [{ role: 'user' as const, content: PROMPT }] };

  say(`\n1. Ada (chat ${adaChat.id}): "${PROMPT}"`);
  say('   The model charges, charges again (a retry), sends the receipt twice in parallel');
  await handleChatRequest({ ...adaChat, user: ada }, [
    [{ tool: 'lookup_order', input: {} }],
    [charge],
    // The model did not trust the reply (say it looked truncated) and charges again.
    [charge],
    // Two identical calls in one step, run in parallel by the AI SDK.
    [receipt('ch_0001'), receipt('ch_0001')],
  ]);

  say(`\n2. The server restarts; Ada's client re-sends the same chat: replayed from the store`);
  await handleChatRequest({ ...adaChat, user: ada }, [[charge]]);

  const bobChat = { id: 'chat_bob_91c2', messages: [{ role: 'user' as const, content: PROMPT }] };
  say(`\n3. Bob (chat ${bobChat.id}) sends the very same words: his own charge, not Ada's`);
  await handleChatRequest({ ...bobChat, user: bob }, [
    [{ tool: 'lookup_order', input: {} }],
    [charge],
    [receipt('ch_0002')],
  ]);
  await redis?.quit();

  const countBy = (entries: Array<Record<string, unknown>>, field: string) => {
    const counts: Record<string, number> = {};
    for (const entry of entries)
      counts[String(entry[field])] = (counts[String(entry[field])] ?? 0) + 1;
    return counts;
  };
  const charges = countBy(payments.entries, 'user');
  const receiptsTo = countBy(outbox.entries, 'to');
  const receipts = outbox.entries.length;
  say(
    `\nSide effects: charges ${JSON.stringify(charges)}, ${receipts} receipt(s); ${replayed} replayed result(s).`,
  );
  return {
    sideEffects: payments.entries.length + receipts,
    charges,
    receipts,
    receiptsTo,
    replayed,
    transcript,
  };
}

/**
 * What `npm start` (and the root `pnpm demo`, through it) checks: Ada and Bob each charged once
 * and sent one receipt. A side effect that ran twice, one that is missing (Bob's chat handed
 * Ada's charge, replayed, leaves Bob with none) or one for someone else is a problem; `[]` when
 * all is well.
 */
export function problems(result: Pick<AgentResult, 'charges' | 'receiptsTo'>): string[] {
  return [
    ...compare('charge', result.charges, { Ada: 1, Bob: 1 }),
    ...compare('receipt', result.receiptsTo, { 'ada@example.com': 1, 'bob@example.com': 1 }),
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
