/**
 * The example's MCP server: a helpdesk whose mutating tool is idempotent, served over the SDK's
 * Streamable HTTP transport on a node:http server (one McpServer per session).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Idempotency, idempotencyContext, idempotentServer } from '@idempotent-tools/mcp';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface Ticket {
  id: string;
  title: string;
  priority: 'low' | 'high';
  /** The user turn that asked for it (the key's turn part): one ticket per turn and title. */
  turn: string | undefined;
}

/** The side effect: a helpdesk with no idempotency of its own (every create is a new ticket). */
export class Helpdesk {
  readonly tickets: Ticket[] = [];
  create(title: string, priority: Ticket['priority'], turn: string | undefined): Ticket {
    const ticket = { id: `T-${this.tickets.length + 1}`, title, priority, turn };
    this.tickets.push(ticket);
    return ticket;
  }
}

/**
 * One McpServer (per session), its tools wrapped by `idempotentServer`. A call is identified by
 * the client's turn id (`_meta["io.idempotent-tools/turn-id"]`, sent by each client app with
 * every call of a user turn); a client that sends none is identified by its session for
 * `sessionWindow` (5 minutes) only.
 */
export function createHelpdeskServer(
  helpdesk: Helpdesk,
  idempotency: Idempotency,
  log: (line: string) => void = () => {},
): McpServer {
  const server = idempotentServer(new McpServer({ name: 'helpdesk', version: '1.0.0' }), {
    idempotency,
  });

  server.registerTool(
    'create_ticket',
    {
      description: 'Open a support ticket.',
      inputSchema: { title: z.string(), priority: z.enum(['low', 'high']).default('low') },
    },
    async ({ title, priority }, extra) => {
      await new Promise((resolve) => setTimeout(resolve, 50)); // the helpdesk API takes a moment
      const ticket = helpdesk.create(title, priority, idempotencyContext(extra)?.turnId);
      log(`  [helpdesk] created ${ticket.id} "${title}" (side effect #${helpdesk.tickets.length})`);
      return {
        content: [{ type: 'text', text: `Created ticket ${ticket.id}: ${title}` }],
        structuredContent: { id: ticket.id, title, priority },
      };
    },
  );

  server.registerTool(
    'list_tickets',
    { description: 'List the open tickets.', annotations: { readOnlyHint: true } },
    async () => ({
      content: [
        { type: 'text', text: helpdesk.tickets.map((t) => `${t.id} ${t.title}`).join('\n') },
      ],
    }),
  );

  return server;
}

/**
 * Serve MCP over Streamable HTTP on 127.0.0.1. `dropNextReply()` simulates a lost reply: the
 * next `tools/call` runs, then its connection is cut before the result is written.
 */
export async function listen(options: {
  createServer: () => McpServer;
  port?: number;
  log?: (line: string) => void;
}) {
  const log = options.log ?? (() => {});
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  let drop = false;

  const cutBeforeResult = (req: IncomingMessage, res: ServerResponse) => {
    for (const method of ['write', 'end'] as const) {
      const original = res[method].bind(res) as (...args: unknown[]) => unknown;
      Object.assign(res, {
        [method]: (chunk: unknown, ...rest: unknown[]) => {
          if (
            (typeof chunk === 'string' || chunk instanceof Uint8Array) &&
            Buffer.from(chunk).toString().includes('"result"')
          ) {
            log('  [network] connection lost before the reply reached the client');
            req.socket.destroy();
            return method === 'end' ? res : true;
          }
          return original(chunk, ...rest);
        },
      });
    }
  };

  const http = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    if (body?.method === 'tools/call') {
      const { name, arguments: args } = body.params;
      log(`→ tools/call id=${body.id} ${name} ${JSON.stringify(args)}`);
      if (drop) {
        drop = false;
        cutBeforeResult(req, res);
      }
    }
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? sessions.get(sessionId) : undefined;
    if (transport === undefined) {
      const created: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (id) => {
          sessions.set(id, created);
        },
      });
      transport = created;
      await options.createServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;

  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    dropNextReply: () => {
      drop = true;
    },
    close: async () => {
      for (const transport of sessions.values()) await transport.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
