/**
 * An MCP server whose mutating tool is idempotent (`idempotentServer`), and a scripted client
 * that loses replies and retries, over Streamable HTTP on 127.0.0.1:
 *
 * 1. the reply to `create_ticket` is lost after the ticket was created; the client retries (same
 *    session, new JSON-RPC id): the stored result is replayed, no second ticket;
 * 2. two identical calls at once: one ticket, the other call waits and replays;
 * 3. the reply is lost, the server restarts, the client reconnects (a new session) and retries
 *    with its turn id in `_meta`: replayed from the SQLite store.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIdempotency, REPLAYED_META, TURN_ID_META } from '@idempotent-tools/mcp';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { createHelpdeskServer, Helpdesk, listen } from './server.js';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));

export interface MainOptions {
  /** Receives each transcript line. @default nothing is printed */
  print?: (line: string) => void;
  /** Where the SQLite file lives (emptied first). @default the example's .demo-data/ */
  dataDir?: string;
}

export interface MainResult {
  /** Tickets created (the side effect). */
  sideEffects: number;
  /** `create_ticket` calls the client sent, retries included. */
  calls: number;
  /** Results that came back marked replayed. */
  replayed: number;
  /** Tickets created more than once for the same title (must be 0). */
  duplicates: number;
  transcript: string[];
}

async function connect(url: URL): Promise<Client> {
  const client = new Client({ name: 'scripted-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url));
  return client;
}

export async function main(options: MainOptions = {}): Promise<MainResult> {
  const transcript: string[] = [];
  const log = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const dataDir = options.dataDir ?? join(exampleDir, '.demo-data');
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const dbPath = join(dataDir, 'mcp.db');

  const helpdesk = new Helpdesk();
  let calls = 0;
  let replayed = 0;
  const start = async () => {
    const store = openSqliteStore(dbPath);
    const idempotency = createIdempotency({ store });
    const server = await listen({
      createServer: () => createHelpdeskServer(helpdesk, idempotency, log),
      log,
    });
    return { store, server, client: await connect(server.url) };
  };
  /** One `create_ticket` call as the client sees it: a result, or a lost reply. */
  const createTicket = async (client: Client, title: string, meta?: Record<string, string>) => {
    calls++;
    try {
      const result = (await client.callTool({
        name: 'create_ticket',
        arguments: { title, priority: 'high' },
        ...(meta === undefined ? {} : { _meta: meta }),
      })) as CallToolResult;
      const isReplay = result._meta?.[REPLAYED_META] === true;
      if (isReplay) replayed++;
      const text = result.content?.[0]?.type === 'text' ? result.content[0].text : '';
      log(`← ${text}${isReplay ? `   (replayed: _meta["${REPLAYED_META}"] = true)` : ''}`);
    } catch (error) {
      log(`← client error: ${error instanceof Error ? error.message : String(error)}; retrying`);
    }
  };

  let running = await start();
  log(`MCP server at ${running.server.url} (Streamable HTTP, JSON responses)`);
  log(`idempotency store: SQLite ${relative(process.cwd(), dbPath) || dbPath}`);
  const { tools } = await running.client.listTools();
  for (const tool of tools)
    log(`  tool ${tool.name}: annotations ${JSON.stringify(tool.annotations)}`);

  log('\n1. The reply is lost after the tool ran; the client retries in the same session');
  running.server.dropNextReply();
  await createTicket(running.client, 'Printer on fire');
  await createTicket(running.client, 'Printer on fire');

  log('\n2. Two identical calls at once');
  await Promise.all([
    createTicket(running.client, 'VPN down'),
    createTicket(running.client, 'VPN down'),
  ]);

  log('\n3. The reply is lost, the server restarts, the client reconnects (new session)');
  log('   and retries with its turn id in _meta');
  const turnId = randomUUID(); // the host's id of the user's message
  const meta = { [TURN_ID_META]: turnId };
  running.server.dropNextReply();
  await createTicket(running.client, 'Laptop stolen', meta);
  await running.client.close();
  await running.server.close();
  running.store.close();
  log('  [server] restarted on the same SQLite file');
  running = await start();
  await createTicket(running.client, 'Laptop stolen', meta);

  await running.client.close();
  await running.server.close();
  running.store.close();

  const titles = helpdesk.tickets.map((ticket) => ticket.title);
  const duplicates = titles.length - new Set(titles).size;
  log(
    `\ncreate_ticket: ${calls} calls sent, ${replayed} replayed, ${helpdesk.tickets.length} tickets created: ${helpdesk.tickets.map((t) => t.id).join(', ')}`,
  );
  log(duplicates === 0 ? 'Every ticket was created once.' : `${duplicates} duplicate tickets!`);
  return { sideEffects: helpdesk.tickets.length, calls, replayed, duplicates, transcript };
}
