import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { type IdempotentServerOptions, idempotencyContext, idempotentServer } from '../index.js';

/** How many times each tool's side effect ran. */
export type Runs = Record<string, number>;

/**
 * A helpdesk MCP server made idempotent with `idempotentServer`: every tool counts its side
 * effects in `runs` (shared by the servers of every session). The same tools on either SDK.
 */
export function createHelpdesk(
  runs: Runs,
  options: IdempotentServerOptions,
  // 1.x by default; test-utils/modern.ts passes a 2.x McpServer (same tools, plus `deploy`).
  bare: McpServer = new McpServer({ name: 'helpdesk', version: '1.0.0' }),
): McpServer {
  const server = idempotentServer(bare, options);
  const ran = (tool: string) => {
    runs[tool] = (runs[tool] ?? 0) + 1;
    return runs[tool];
  };

  server.registerTool(
    'create_ticket',
    {
      description: 'Open a support ticket.',
      inputSchema: { title: z.string(), priority: z.enum(['low', 'high']).default('low') },
    },
    async ({ title, priority }, extra) => {
      const n = ran('create_ticket');
      await new Promise((resolve) => setTimeout(resolve, 10));
      return {
        content: [{ type: 'text', text: `Created ticket T-${n}: ${title}` }],
        structuredContent: {
          ticketId: `T-${n}`,
          title,
          priority,
          key: idempotencyContext(extra)?.key,
        },
      };
    },
  );

  server.registerTool(
    'charge_card',
    {
      description: 'Charge a card.',
      inputSchema: { amount: z.number() },
      outputSchema: { chargeId: z.string(), amount: z.number(), replayed: z.boolean().optional() },
    },
    async ({ amount }) => {
      const chargeId = `ch_${ran('charge_card')}`;
      return {
        content: [{ type: 'text', text: JSON.stringify({ chargeId, amount }) }],
        structuredContent: { chargeId, amount },
      };
    },
  );

  server.registerTool(
    'send_email',
    {
      description: 'Send an email.',
      inputSchema: { to: z.string() },
      outputSchema: { messageId: z.string() },
    },
    async () => {
      const messageId = `m_${ran('send_email')}`;
      return { content: [{ type: 'text', text: messageId }], structuredContent: { messageId } };
    },
  );

  server.registerTool(
    'create_user',
    { description: 'Create a user.', inputSchema: { email: z.string(), name: z.string() } },
    async ({ email }) => ({
      content: [{ type: 'text', text: `user u_${ran('create_user')} <${email}>` }],
    }),
  );

  server.registerTool(
    'list_tickets',
    { description: 'List tickets.', annotations: { readOnlyHint: true } },
    async () => ({ content: [{ type: 'text', text: `list #${ran('list_tickets')}` }] }),
  );

  server.registerTool('ping_oncall', { description: 'Page the on-call engineer.' }, async () => ({
    content: [{ type: 'text', text: `paged #${ran('ping_oncall')}` }],
  }));

  server.registerTool(
    'close_all',
    { description: 'Close every open ticket.' },
    async (extra: object) => ({
      content: [
        { type: 'text', text: `closed #${ran('close_all')} ${idempotencyContext(extra)?.key}` },
      ],
    }),
  );

  server.registerTool(
    'flaky_export',
    { description: 'Export tickets; fails on its first run.', inputSchema: { format: z.string() } },
    async ({ format }) => {
      if (ran('flaky_export') === 1) throw new Error('export service timed out');
      return { content: [{ type: 'text', text: `exported ${format}` }] };
    },
  );

  server.registerTool(
    'archive',
    {
      description: 'Archive a ticket; reports an error on its first run.',
      inputSchema: { id: z.string() },
    },
    async ({ id }) =>
      ran('archive') === 1
        ? { content: [{ type: 'text', text: `archive of ${id} is locked` }], isError: true }
        : { content: [{ type: 'text', text: `archived ${id}` }] },
  );

  server.registerTool(
    'reopen_ticket',
    {
      description: 'Reopen a ticket (reopening twice changes nothing).',
      inputSchema: { id: z.string() },
      annotations: { idempotentHint: true }, // the owner's own statement
    },
    async ({ id }) => ({
      content: [{ type: 'text', text: `reopened ${id} #${ran('reopen_ticket')}` }],
    }),
  );

  return server;
}

/** A real SDK `Client` connected to `server` over `InMemoryTransport.createLinkedPair()`. */
export async function connectInMemory(
  server: McpServer,
  options: { sessionId?: string } = {},
): Promise<Client> {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  if (options.sessionId !== undefined) serverTransport.sessionId = options.sessionId;
  await server.connect(serverTransport);
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(clientTransport);
  return client;
}

/** `client.callTool` (either SDK's client) with the result typed as a `CallToolResult`. */
export async function callTool(
  client: Pick<Client, 'callTool'> | { callTool(params: never): Promise<unknown> },
  name: string,
  args: Record<string, unknown> = {},
  meta?: Record<string, unknown>,
): Promise<CallToolResult> {
  return (await (client as Client).callTool({
    name,
    arguments: args,
    ...(meta === undefined ? {} : { _meta: meta }),
  })) as CallToolResult;
}

/** The text parts of a result. */
export function texts(result: CallToolResult): string[] {
  return (result.content ?? []).flatMap((part) => (part.type === 'text' ? [part.text] : []));
}

/** The `errorForModel` JSON of an idempotency error result (undefined when it is none). */
export function modelError(
  result: CallToolResult,
): { error: string; message: string; next: string } | undefined {
  if (result.isError !== true) return undefined;
  return JSON.parse(texts(result)[0] ?? '{}');
}
