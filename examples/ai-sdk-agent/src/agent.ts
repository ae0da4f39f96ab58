/**
 * An AI SDK agent (the real `generateText` tool loop) whose tools are wrapped by
 * `idempotentTools`: a retried charge is replayed, a parallel duplicate receipt is sent once, and
 * a restarted server that re-runs the same conversation replays from the durable store.
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

/** The agent's tools, as you would write them for the AI SDK. */
function shopTools(payments: Ledger, outbox: Ledger) {
  return {
    lookup_order: tool({
      description: 'Look up an order: its customer and amount due, in cents.',
      inputSchema: z.object({ orderId: z.string() }),
      execute: async ({ orderId }) => ({ orderId, customer: 'ada@example.com', amountDue: 1999 }),
    }),
    charge_card: tool({
      description: 'Charge the card on file for an order.',
      inputSchema: z.object({ orderId: z.string(), amount: z.number().int() }),
      execute: async ({ orderId, amount }) => {
        await new Promise((resolve) => setTimeout(resolve, 20)); // the vendor takes a moment
        const chargeId = `ch_${String(payments.entries.length + 1).padStart(4, '0')}`;
        payments.append({ chargeId, orderId, amount });
        return { chargeId, orderId, amount, status: 'succeeded' };
      },
    }),
    send_receipt: tool({
      description: 'Email the receipt of a charge to the customer.',
      inputSchema: z.object({ to: z.string(), chargeId: z.string() }),
      execute: async ({ to, chargeId }) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        outbox.append({ to, chargeId });
        return `receipt for ${chargeId} sent to ${to}`;
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

const order = { orderId: 'ord_1001', amount: 1999 };

/** What the offline model does: look up, charge, retry the charge, send the receipt twice. */
function firstRunScript(): Calls[] {
  return [
    [{ tool: 'lookup_order', input: { orderId: order.orderId } }],
    [{ tool: 'charge_card', input: order }],
    // The model did not trust the reply (say it looked truncated) and charges again.
    [{ tool: 'charge_card', input: order }],
    // Two identical calls in one step, run in parallel by the AI SDK.
    [
      { tool: 'send_receipt', input: { to: 'ada@example.com', chargeId: 'ch_0001' } },
      { tool: 'send_receipt', input: { to: 'ada@example.com', chargeId: 'ch_0001' } },
    ],
  ];
}

export interface AgentResult {
  /** Real executions of side effects (charges + receipts). */
  sideEffects: number;
  charges: number;
  receipts: number;
  /** Tool results the model saw marked `replayed: true`. */
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

  say('AI SDK agent with idempotent tools');
  say(
    `  model: ${realModel ? `OpenAI ${process.env.OPENAI_MODEL ?? 'gpt-4o-mini'}` : 'scripted mock (offline)'}; store: ${redis ? 'Redis' : 'SQLite (.demo-data/idempotency.sqlite)'}`,
  );
  const messages: ModelMessage[] = [
    {
      role: 'user',
      content: `Please charge order ${order.orderId} and email the receipt to the customer.`,
    },
  ];
  let replayed = 0;

  /** One server process handling the request: its own store connection and tool set. */
  const serve = async (label: string, script: Calls[]) => {
    say(`\n${label}`);
    const store = openStore();
    const tools = idempotentTools(shopTools(payments, outbox), {
      store,
      exclude: ['lookup_order'], // read-only: no record needed
    });
    const model = realModel
      ? openai(process.env.OPENAI_MODEL ?? 'gpt-4o-mini')
      : scriptedModel(script, 'Order ord_1001 is charged and the receipt is on its way.');
    const result = await generateText({
      model,
      tools,
      instructions: 'You are a billing assistant. Use the tools; be brief.',
      messages,
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

  await serve(
    '1. The request: look up, charge, charge again (a retry), send the receipt twice in parallel',
    firstRunScript(),
  );
  await serve(
    '2. The server restarts and the client re-sends the same conversation: replayed from the store',
    [[{ tool: 'charge_card', input: order }]],
  );
  await redis?.quit();

  const charges = payments.entries.length;
  const receipts = outbox.entries.length;
  say(
    `\nSide effects: ${charges} charge(s), ${receipts} receipt(s); ${replayed} replayed result(s).`,
  );
  return { sideEffects: charges + receipts, charges, receipts, replayed, transcript };
}
