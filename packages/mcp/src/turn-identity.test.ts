/**
 * The turn identity cases (`@idempotent-tools/testing`) for the MCP server adapter.
 *
 * What a conversation is for MCP: the server never sees the conversation. What it sees is what a
 * client sends with each `tools/call`. Here a "conversation" is one client app's chat: it
 * connects its own MCP client (over real Streamable HTTP on 127.0.0.1) and sends, with every
 * call of a user turn, `_meta["io.idempotent-tools/turn-id"]`: its id of that user message (a
 * UUID, new for every message the user sends, the same when the app re-sends the message). The
 * "model" is the app calling `create_ticket` with the user's words. System prompts never reach
 * an MCP server, so a rebuilt one changes nothing it sees. `conversation(undefined)` is a client
 * that sends no turn id, on a server where nothing else identifies the call (stateless HTTP,
 * 2026-07-28, or a session with `sessionWindow: false`): the server refuses with an `isError`
 * result whose error is `configuration`, which the app surfaces as an error to its developer.
 * (A stateful session with the default `sessionWindow` is a short-lived identity of its own, so
 * case 5 does not apply there: see findings.test.ts.) Tools made idempotent twice: the app
 * registers them with `idempotentRegisterTool`, then wraps the server with `idempotentServer`:
 * refused where it wraps, before anything is served.
 */
import { randomUUID } from 'node:crypto';
import { runTurnIdentityCases, type TurnIdentityDriver } from '@idempotent-tools/testing';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { describe, expect, test } from 'vitest';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type IdempotentServerOptions,
  idempotentRegisterTool,
  idempotentServer,
  TURN_ID_META,
} from './index.js';
import { callTool, createHelpdesk, modelError, type Runs } from './test-utils/helpdesk.js';
import { connectHttp, startHttpServer } from './test-utils/http.js';
import { connectModern, createModernHelpdesk, startModernServer } from './test-utils/modern.js';

/** What the app's developer gets when the server refuses a call (the client's `isError` result). */
class Refused extends Error {
  constructor(readonly error: { error: string; message: string; next: string }) {
    super(error.message);
  }
}

type Setup = 'sdk 1.x stateless' | 'sdk 2.x 2026-07-28' | 'sdk 1.x stateful, sessionWindow: false';

async function createDriver(setup: Setup): Promise<TurnIdentityDriver> {
  const runs: Runs = {};
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const options: IdempotentServerOptions =
    setup === 'sdk 1.x stateful, sessionWindow: false'
      ? { idempotency, sessionWindow: false }
      : { idempotency };
  const modern = setup === 'sdk 2.x 2026-07-28';
  const createServer = () =>
    modern ? createModernHelpdesk(runs, options) : createHelpdesk(runs, options);
  const http = modern
    ? await startModernServer({ createServer, json: true })
    : await startHttpServer({ createServer, json: true, stateless: setup === 'sdk 1.x stateless' });
  const clients: Array<{ close(): Promise<void> }> = [];
  const connect = async () => {
    const client = modern ? await connectModern(http.url) : (await connectHttp(http.url)).client;
    clients.push(client);
    return client;
  };

  return {
    wrapTwice: true,
    conversation(id, how) {
      if (how?.wrapTwice === true) {
        // The app registers its tools through idempotentRegisterTool, then wraps the server too.
        const bare = modern
          ? (new ModernMcpServer({ name: 'helpdesk', version: '1.0.0' }) as unknown as McpServer)
          : new McpServer({ name: 'helpdesk', version: '1.0.0' });
        idempotentRegisterTool(bare, options)('create_ticket', {}, async () => {
          runs.create_ticket = (runs.create_ticket ?? 0) + 1;
          return { content: [{ type: 'text', text: 'created' }] };
        });
        // Throws: the server's tools are idempotent already (any other error fails the case).
        try {
          idempotentServer(bare, options);
        } catch (error) {
          if (/already idempotent/.test(String((error as Error).message))) throw error;
          throw new Error(`not the double-wrap refusal: ${String(error)}`);
        }
        throw new Error('wrapping twice was not refused');
      }
      const client = connect();
      let message: string | undefined; // the app's id of the last user message
      let words = '';
      const send = async () => {
        const meta = id === undefined ? undefined : { [TURN_ID_META]: message as string };
        const result = await callTool(await client, 'create_ticket', { title: words }, meta);
        const error = modelError(result);
        if (error !== undefined) throw new Refused(error);
      };
      return {
        async say(text) {
          message = randomUUID();
          words = text;
          await send();
        },
        async resend() {
          await send(); // the same message id: the app re-sends the user's message
        },
        async sayLosingReply(text) {
          message = randomUUID();
          words = text;
          http.dropNextResult();
          await expect(send()).rejects.toThrow();
          expect(http.dropped()).toBe(1);
          await send(); // the app's retry of the request whose reply it never got
        },
      };
    },
    effects: () => runs.create_ticket ?? 0,
    async close() {
      for (const client of clients) await client.close();
      await http.close();
    },
  };
}

for (const setup of [
  'sdk 1.x stateless',
  'sdk 2.x 2026-07-28',
  'sdk 1.x stateful, sessionWindow: false',
] as const) {
  runTurnIdentityCases({
    name: `mcp: ${setup} Streamable HTTP, a _meta turn id per user message`,
    describe,
    test,
    expect,
    createDriver: () => createDriver(setup),
    supports: { wrapTwice: true },
    // A refusal the client got (isError, `configuration`), or one thrown where the app wraps.
    isDeveloperError: (error) =>
      ConfigurationError.isInstance(error) ||
      (error instanceof Refused && error.error.error === 'configuration'),
  });
}
