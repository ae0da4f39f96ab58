/**
 * An MCP server whose mutating tool is idempotent (`idempotentServer`), and two users' client
 * apps (the SDK's own `Client`), over Streamable HTTP on 127.0.0.1. Each app connects its own
 * MCP client and sends its id of the user's message as `_meta["io.idempotent-tools/turn-id"]`
 * with every call of that turn (what the server keys the call by):
 *
 * 1. Alice: the reply to `create_ticket` is lost after the ticket was created; her app retries
 *    (same turn id, new JSON-RPC id): the stored result is replayed, no second ticket;
 * 2. Bob, another user, asks for the same ticket with the same words: his own ticket;
 * 3. Alice's model calls the tool twice at once in one turn: one ticket, the other call replays;
 * 4. Alice asks for it again in a new message (a new turn): a new ticket, on purpose;
 * 5. the reply is lost, the server restarts, Alice's app reconnects (a new session) and retries
 *    the turn: replayed from the SQLite store.
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
  /** Tickets created more than once for the same user turn and title (must be 0). */
  duplicates: number;
  /** Each user turn the apps sent (a turn id and a title), with the tickets created for it. */
  turns: Array<{ user: string; title: string; tickets: number }>;
  /** Tickets created for no turn an app sent (must be 0). */
  strays: number;
  transcript: string[];
}

/** A user's client app: its own MCP client; `turn()` starts a user message (a new turn id). */
async function connectApp(url: URL, user: string) {
  const client = new Client({ name: 'helpdesk-chat', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url));
  let turnId = randomUUID();
  return {
    user,
    client,
    /** The user sends a new message: a new turn id (the app's id of that message). */
    turn: () => {
      turnId = randomUUID();
    },
    meta: () => ({ [TURN_ID_META]: turnId }),
  };
}

type App = Awaited<ReturnType<typeof connectApp>>;

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
  /** The user turns sent, by turn id and title: each must get exactly one ticket. */
  const sent = new Map<string, { user: string; turn: string; title: string }>();
  const start = async () => {
    const store = openSqliteStore(dbPath);
    const idempotency = createIdempotency({ store });
    const server = await listen({
      createServer: () => createHelpdeskServer(helpdesk, idempotency, log),
      log,
    });
    return { store, server };
  };
  /** One `create_ticket` call as the app sees it: a result, or a lost reply. */
  const createTicket = async (app: App, title: string) => {
    calls++;
    const turn = app.meta()[TURN_ID_META];
    sent.set(`${turn} ${title}`, { user: app.user, turn, title });
    try {
      const result = (await app.client.callTool({
        name: 'create_ticket',
        arguments: { title, priority: 'high' },
        _meta: app.meta(),
      })) as CallToolResult;
      const isReplay = result._meta?.[REPLAYED_META] === true;
      if (isReplay) replayed++;
      const text = result.content?.[0]?.type === 'text' ? result.content[0].text : '';
      log(`← ${app.user}: ${text.replaceAll('\n\n', ' ')}`);
    } catch (error) {
      log(
        `← ${app.user}: client error: ${error instanceof Error ? error.message : String(error)}; retrying`,
      );
    }
  };

  let running = await start();
  log(`MCP server at ${running.server.url} (Streamable HTTP, JSON responses)`);
  log(`idempotency store: SQLite ${relative(process.cwd(), dbPath) || dbPath}`);
  let alice = await connectApp(running.server.url, 'alice');
  const bob = await connectApp(running.server.url, 'bob');
  const { tools } = await alice.client.listTools();
  for (const tool of tools)
    log(`  tool ${tool.name}: annotations ${JSON.stringify(tool.annotations)}`);

  log('\n1. Alice: "Open a ticket, the printer is on fire". The reply is lost after the tool ran;');
  log('   her app retries the turn (same turn id)');
  running.server.dropNextReply();
  await createTicket(alice, 'Printer on fire');
  await createTicket(alice, 'Printer on fire');

  log('\n2. Bob, another user, sends the same words: his own ticket');
  await createTicket(bob, 'Printer on fire');

  log('\n3. Alice: "VPN is down". Her model calls the tool twice at once in that turn');
  alice.turn();
  await Promise.all([createTicket(alice, 'VPN down'), createTicket(alice, 'VPN down')]);

  log('\n4. Alice, in a new message: "The printer is on fire again, open another one"');
  alice.turn();
  await createTicket(alice, 'Printer on fire');

  log('\n5. Alice: "My laptop was stolen". The reply is lost, the server restarts, her app');
  log('   reconnects (a new session) and retries the turn');
  alice.turn();
  const meta = alice.meta();
  running.server.dropNextReply();
  await createTicket(alice, 'Laptop stolen');
  await alice.client.close();
  await bob.client.close();
  await running.server.close();
  running.store.close();
  log('  [server] restarted on the same SQLite file');
  running = await start();
  alice = await connectApp(running.server.url, 'alice');
  alice.meta = () => meta; // the same user message, sent again
  await createTicket(alice, 'Laptop stolen');

  await alice.client.close();
  await running.server.close();
  running.store.close();

  // A duplicate: two tickets for one user turn and title (a retry that ran the tool again).
  const perTurn = helpdesk.tickets.map((ticket) => `${ticket.turn} ${ticket.title}`);
  const duplicates = perTurn.length - new Set(perTurn).size;
  log(
    `\ncreate_ticket: ${calls} calls sent, ${replayed} replayed, ${helpdesk.tickets.length} tickets created: ${helpdesk.tickets.map((t) => `${t.id} ${t.title}`).join(', ')}`,
  );
  log(
    duplicates === 0 ? 'Every user turn got its ticket once.' : `${duplicates} duplicate tickets!`,
  );
  // The server's turn of a ticket is the client's turn id, scoped by the client's name.
  const forTurn = (
    ticket: { turn: string | undefined; title: string },
    turn: string,
    title: string,
  ) => ticket.title === title && ticket.turn?.includes(turn) === true;
  const turns = [...sent.values()].map(({ user, turn, title }) => ({
    user,
    title,
    tickets: helpdesk.tickets.filter((t) => forTurn(t, turn, title)).length,
  }));
  const strays = helpdesk.tickets.filter(
    (t) => ![...sent.values()].some(({ turn, title }) => forTurn(t, turn, title)),
  ).length;
  return {
    sideEffects: helpdesk.tickets.length,
    calls,
    replayed,
    duplicates,
    turns,
    strays,
    transcript,
  };
}

/**
 * What `npm start` (and the root `pnpm demo`, through it) checks: exactly one ticket per user
 * turn. A turn with two tickets (a retry that ran again), a turn with none (missing: or Bob's
 * turn handed Alice's ticket, replayed) or a ticket for no turn is a problem; `[]` when all is
 * well.
 */
export function problems(result: Pick<MainResult, 'turns' | 'strays'>): string[] {
  const found: string[] = [];
  for (const { user, title, tickets } of result.turns) {
    if (tickets > 1) found.push(`${user}'s turn "${title}": ${tickets} tickets, expected 1`);
    if (tickets === 0)
      found.push(`${user}'s turn "${title}": no ticket (missing, or another user's replayed)`);
  }
  if (result.strays > 0) found.push(`${result.strays} ticket(s) for no turn a user sent`);
  return found;
}
