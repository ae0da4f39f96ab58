/**
 * A payments MCP server whose `refund` asks the user for approval (MCP elicitation), and real
 * clients that answer the elicitation requests with a scripted action, on either SDK.
 */
import { appendFileSync } from 'node:fs';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type IdempotentServerOptions, idempotentServer } from '../index.js';

/** What the user answers; `undefined`: the client declares no elicitation capability. */
export type Answer = 'accept' | 'decline' | 'cancel';

/** The elicitation requests a client received, and how it answers the next ones. */
export interface Asker {
  asked: Array<{ message: string; mode: unknown }>;
  answers: Answer[];
}

export const asker = (...answers: Answer[]): Asker => ({ asked: [], answers });

/** The answer to one elicitation request: the next scripted one (cancel when none is left). */
function answer(asker: Asker, params: { message?: unknown; mode?: unknown }) {
  asker.asked.push({ message: String(params.message), mode: params.mode });
  const action = asker.answers.shift() ?? 'cancel';
  return action === 'accept' ? { action, content: {} } : { action };
}

/**
 * The payments server: `refund` asks for approval (its side effect: a line in `effects`, or a
 * count in `runs`), `lookup` (read-only) asks too, `note` does not ask.
 */
export function createPayments(
  runs: Record<string, number>,
  options: IdempotentServerOptions,
  bare: McpServer = new McpServer({ name: 'payments', version: '1.0.0' }),
  refunds: { effects?: string; afterEffect?: () => void } = {},
): McpServer {
  const server = idempotentServer(bare, {
    ...options,
    policies: {
      refund: { approval: { message: 'Refund this order?' } },
      lookup: { approval: true },
      ...options.policies,
    },
  });
  const ran = (tool: string) => {
    runs[tool] = (runs[tool] ?? 0) + 1;
    return runs[tool];
  };
  server.registerTool(
    'refund',
    {
      description: 'Refund an order.',
      inputSchema: { order: z.string(), amount: z.number() },
    },
    async ({ order, amount }) => {
      const n = ran('refund');
      const { effects, afterEffect } = refunds;
      if (effects !== undefined) appendFileSync(effects, `${order} ${amount} pid=${process.pid}\n`);
      afterEffect?.();
      return { content: [{ type: 'text', text: `refunded ${amount} on ${order} #${n}` }] };
    },
  );
  server.registerTool(
    'lookup',
    {
      description: 'Look up a card holder.',
      inputSchema: { card: z.string() },
      annotations: { readOnlyHint: true },
    },
    async ({ card }) => ({ content: [{ type: 'text', text: `${card} #${ran('lookup')}` }] }),
  );
  server.registerTool(
    'note',
    { description: 'Add a note.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: `${text} #${ran('note')}` }] }),
  );
  return server;
}

/**
 * A real 1.x `Client` (declaring form elicitation unless `asker` is undefined) connected to
 * `server` in memory, with a session id (what a stateful Streamable HTTP session is).
 */
export async function connectAsking(
  server: McpServer,
  asker: Asker | undefined,
  options: { sessionId?: string; name?: string } = {},
) {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  if (options.sessionId !== undefined) serverTransport.sessionId = options.sessionId;
  await server.connect(serverTransport);
  const client = new Client(
    { name: options.name ?? 'approval-client', version: '1.0.0' },
    asker === undefined ? {} : { capabilities: { elicitation: { form: {} } } },
  );
  if (asker !== undefined) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => answer(asker, request.params));
  }
  await client.connect(clientTransport);
  return client;
}

/** A real 1.x `Client` over Streamable HTTP, answering elicitations (declaring form elicitation). */
export async function connectHttpAsking(url: URL, asker: Asker) {
  const client = new Client(
    { name: 'http-approval-client', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (request) => answer(asker, request.params));
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

/** A real 2.x `Client` speaking 2026-07-28 over HTTP, answering elicitations (multi round-trip). */
export async function connectModernAsking(url: URL, asker: Asker | undefined) {
  const client = new ModernClient(
    { name: 'modern-approval-client', version: '1.0.0' },
    {
      capabilities: asker === undefined ? {} : { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    },
  );
  if (asker !== undefined) {
    client.setRequestHandler('elicitation/create', async (request) =>
      answer(asker, request.params as { message?: unknown; mode?: unknown }),
    );
  }
  await client.connect(new ModernTransport(url));
  return client;
}
