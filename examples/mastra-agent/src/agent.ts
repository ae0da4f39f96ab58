/**
 * A Mastra support agent whose refund tool is made idempotent with @idempotent-tools/mastra.
 * Memory (threads) and run snapshots live in Mastra's own storage (InMemoryStore here; LibSQL or
 * PostgreSQL in production); the idempotency records in SQLite under .demo-data/.
 *
 * Offline (default) the model is Mastra's own OpenAI model router pointed at a local scripted
 * OpenAI-compatible server that cuts a reply mid-stream; with OPENAI_API_KEY the real API.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { idempotentTools } from '@idempotent-tools/mastra';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { type ModelTurn, startScriptedServer } from '@idempotent-tools/testing/openai';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { Memory } from '@mastra/memory';
import { z } from 'zod';

export interface Result {
  /** Refunds the "payment vendor" made, per order. */
  refunds: Record<string, number>;
  lines: string[];
}

/** The scripted model: a refund of the order the user names, called twice in one step. */
function scriptedModel(turn: ModelTurn) {
  if (turn.toolOutputs.length > 0) return { content: `Refunded: ${turn.toolOutputs[0]}` };
  const order = /order (\d+)/.exec(turn.userText)?.[1] ?? '0';
  const call = { name: 'refund_order', arguments: { order, cents: 1200 } };
  return { toolCalls: [call, call] }; // a parallel duplicate in one step
}

export async function main(options: { dataDir?: string; print?: (line: string) => void } = {}) {
  const lines: string[] = [];
  const print = (line: string) => {
    lines.push(line);
    options.print?.(line);
  };
  const dataDir = options.dataDir ?? fileURLToPath(new URL('../.demo-data', import.meta.url));
  if (existsSync(dataDir)) rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });

  const refunds: Record<string, number> = {};
  const refundOrder = createTool({
    id: 'refund_order',
    description: 'Refund an order to the card it was paid with.',
    inputSchema: z.object({ order: z.string(), cents: z.number().int().positive() }),
    execute: async ({ order, cents }) => {
      refunds[order] = (refunds[order] ?? 0) + 1; // the vendor's side effect
      return { refund: `re_${order}_${refunds[order]}`, order, cents };
    },
  });
  const tools = idempotentTools(
    { refund_order: refundOrder },
    { store: openSqliteStore(join(dataDir, 'idempotency.db')) },
  );

  const live = process.env.OPENAI_API_KEY !== undefined;
  const server = live ? undefined : await startScriptedServer({ respond: scriptedModel });
  const model = server
    ? { id: 'openai/gpt-4o-mini' as const, url: server.baseURL, apiKey: 'offline' }
    : `openai/${process.env.OPENAI_MODEL ?? 'gpt-4.1-mini'}`;
  const storage = new InMemoryStore();
  const agent = new Agent({
    id: 'support',
    name: 'support',
    instructions:
      'You are a support agent. To refund an order, call refund_order once with its number and 1200 cents.',
    model,
    tools,
    memory: new Memory({ storage }),
    maxRetries: 0,
  });
  const support = new Mastra({ agents: { support: agent }, storage, logger: false }).getAgent(
    'support',
  );
  const say = async (who: string, thread: string, text: string) => {
    const stream = await support.stream(text, { memory: { thread, resource: who } });
    const out = await stream.getFullOutput();
    if (out.error !== undefined) throw out.error;
    return out;
  };

  try {
    print(`Mode: ${live ? 'the real OpenAI API' : 'offline, scripted model server'}`);
    print('1. Ann: "Please refund order 1001." (the model calls refund_order twice in one step)');
    server?.inject(undefined, 'truncate'); // offline: the reply after the tools ran is cut
    const lost = await say('ann', 'ann-chat', 'Please refund order 1001.').then(
      () => false,
      (error: unknown) => (server ? true : Promise.reject(error)),
    );
    if (server) print(`   the stream broke after the refund ran: ${lost ? 'yes' : 'no'}`);
    if (server) {
      print('2. The app sends the same turn again');
      const retried = await say('ann', 'ann-chat', 'Please refund order 1001.');
      const replayed = retried.toolResults.filter(
        (r) => (r.payload.result as { replayed?: boolean } | undefined)?.replayed === true,
      ).length;
      print(`   tool results replayed: ${replayed > 0 ? 'yes' : 'no'}`);
    }
    print('3. Ann, a new turn with the same words: a new refund');
    await say('ann', 'ann-chat', 'Please refund order 1001.');
    print('4. Bob, in his own chat: his own refund');
    await say('bob', 'bob-chat', 'Please refund order 1002.');
    for (const [order, count] of Object.entries(refunds).sort()) {
      print(`   order ${order}: refunded ${count} time(s)`);
    }
  } finally {
    await server?.close();
  }
  return { refunds, lines };
}
