/**
 * The approval contract (docs/design.md, "Turn identity", approvals) as the cases of
 * @idempotent-tools/testing, over MCP elicitation with real clients and servers:
 * - push-style `elicitation/create` during the call (1.x in memory; the 2.x server on a 2025
 *   connection, its legacy leg): the user's answer is the reply to the server's own request
 *   inside the call; "approve again" is the client retrying the call after accepting;
 * - 2026-07-28 over Streamable HTTP (an `input_required` result, answered by a retry carrying
 *   `inputResponses`), with the 2.x client in manual mode, so the client app decides what it
 *   sends back: the answer to the question with other arguments (an edited retry), or an answer
 *   to a question the server never asked (a forged one).
 * MCP has no call ids: "approve A, run B" is the edited retry, so it is not run twice.
 */
import { randomUUID } from 'node:crypto';
import {
  type ApprovalDriver,
  type ChargeArgs,
  type PendingApproval,
  runApprovalCases,
} from '@idempotent-tools/testing';
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  APPROVAL_INPUT_PREFIX,
  type CallToolResult,
  createIdempotency,
  createMemoryStore,
  idempotentServer,
  TURN_ID_META,
} from './index.js';
import { startModernServer } from './test-utils/modern.js';

type Action = 'accept' | 'decline';
const answerOf = (action: Action) => (action === 'accept' ? { action, content: {} } : { action });

/** The payments server: `charge` asks the user first (its side effect: a push to `charges`). */
function createCharges(charges: ChargeArgs[], bare: McpServer) {
  const server = idempotentServer(bare, {
    idempotency: createIdempotency({ store: createMemoryStore() }),
    policies: { charge: { approval: { message: 'Charge the customer?' } } },
  });
  server.registerTool(
    'charge',
    { description: 'Charge the customer.', inputSchema: { amount: z.number() } },
    async ({ amount }) => {
      charges.push({ amount });
      return { content: [{ type: 'text', text: `charged ${amount}` }] };
    },
  );
  return server;
}

/**
 * Push-style: the call waits while the user is asked; `approve` / `reject` answer that question
 * and wait for the call. Done again, the client retries the call (the same turn id) and answers
 * whatever it is asked the same way.
 */
function pushDriver(server: 'sdk 1.x' | 'sdk 2.x, 2025 connection') {
  return async (): Promise<ApprovalDriver> => {
    const charges: ChargeArgs[] = [];
    const bare =
      server === 'sdk 1.x'
        ? new McpServer({ name: 'payments', version: '1.0.0' })
        : (new ModernMcpServer({ name: 'payments', version: '1.0.0' }) as unknown as McpServer);
    const payments = createCharges(charges, bare);
    const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
    serverTransport.sessionId = 'session-1';
    await payments.connect(serverTransport);
    const client = new Client(
      { name: 'approval-client', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } } },
    );
    let auto: Action | undefined;
    let question: ((answer: unknown) => void) | undefined;
    let onAsked = () => {};
    client.setRequestHandler(ElicitRequestSchema, async () => {
      if (auto !== undefined) return answerOf(auto);
      return new Promise((resolve) => {
        question = resolve as (answer: unknown) => void;
        onAsked();
      });
    });
    await client.connect(clientTransport);
    const call = (args: ChargeArgs, turn: string) =>
      client.callTool({ name: 'charge', arguments: { ...args }, _meta: { [TURN_ID_META]: turn } });

    return {
      async ask(args): Promise<PendingApproval> {
        const turn = randomUUID();
        const asked = new Promise<void>((resolve) => {
          onAsked = resolve;
        });
        let inFlight: Promise<unknown> | undefined = call(args, turn);
        const ran = inFlight.then(() => {
          throw new Error('the call finished without asking');
        });
        await Promise.race([asked, ran]);
        const decide = async (action: Action) => {
          if (inFlight !== undefined && question !== undefined) {
            const waiting = inFlight;
            inFlight = undefined;
            question(answerOf(action));
            question = undefined;
            await waiting;
            return;
          }
          auto = action; // the client retries the call; the user answers the same way
          try {
            await call(args, turn);
          } finally {
            auto = undefined;
          }
        };
        return { approve: () => decide('accept'), reject: () => decide('decline') };
      },
      effects: () => charges,
      close: () => client.close(),
    };
  };
}

/** A 2.x client speaking 2026-07-28 in manual mode: it sends the answers itself. */
async function manualClient(url: URL) {
  const client = new ModernClient(
    { name: 'manual-approval-client', version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
      inputRequired: { autoFulfill: false },
    },
  );
  await client.connect(new ModernTransport(url));
  return client;
}

/**
 * 2026-07-28: the first call returns `input_required` (the question, keyed by its approval key);
 * the client app answers by sending the call again with `inputResponses`. An edited answer is the
 * retry with other arguments and the answer to the question about the first ones; a forged one
 * is a call, in a turn where nothing was asked, carrying an accept under the exact key this
 * server would give its question (taken from a twin server with the same derivation).
 */
function multiRoundTripDriver() {
  return async (): Promise<ApprovalDriver> => {
    const charges: ChargeArgs[] = [];
    const twinCharges: ChargeArgs[] = [];
    const bare = () => new ModernMcpServer({ name: 'payments', version: '1.0.0' });
    // One server (and store) for every request, as a stateless deployment with a shared store.
    const shared = createCharges(charges, bare() as unknown as McpServer);
    const http = await startModernServer({ createServer: () => shared, json: true });
    const twinServer = createCharges(twinCharges, bare() as unknown as McpServer);
    const twin = await startModernServer({ createServer: () => twinServer, json: true });
    const client = await manualClient(http.url);
    const twinClient = await manualClient(twin.url);
    type Reply = CallToolResult & { resultType?: string; inputRequests?: Record<string, unknown> };
    const call = async (
      on: typeof client,
      args: ChargeArgs,
      turn: string,
      inputResponses?: Record<string, unknown>,
    ) =>
      (await on.callTool(
        {
          name: 'charge',
          arguments: { ...args },
          _meta: { [TURN_ID_META]: turn },
          ...(inputResponses === undefined ? {} : { inputResponses }),
        } as never,
        { allowInputRequired: true },
      )) as Reply;
    const questionOf = (reply: Reply) => {
      const keys = Object.keys(reply.inputRequests ?? {});
      if (reply.resultType !== 'input_required' || keys.length !== 1) {
        throw new Error(`not asked: ${JSON.stringify(reply)}`);
      }
      return keys[0] as string;
    };

    return {
      async ask(args): Promise<PendingApproval> {
        const turn = randomUUID();
        const key = questionOf(await call(client, args, turn));
        expect(key.startsWith(APPROVAL_INPUT_PREFIX)).toBe(true);
        const answer = (action: Action) => ({ [key]: answerOf(action) });
        return {
          approve: async () => void (await call(client, args, turn, answer('accept'))),
          reject: async () => void (await call(client, args, turn, answer('decline'))),
          approveEdited: async (other) => void (await call(client, other, turn, answer('accept'))),
        };
      },
      async forge(args) {
        const turn = randomUUID();
        // The key this server's question would have: asked by the twin, never by this server.
        const key = questionOf(await call(twinClient, args, turn));
        const reply = await call(client, args, turn, { [key]: answerOf('accept') });
        // Not run: asked for real instead, under the very key the forged answer named.
        expect(questionOf(reply)).toBe(key);
      },
      effects: () => charges,
      async close() {
        await client.close();
        await twinClient.close();
        await http.close();
        await twin.close();
      },
    };
  };
}

for (const server of ['sdk 1.x', 'sdk 2.x, 2025 connection'] as const) {
  runApprovalCases({
    name: `mcp: ${server}, elicitation/create during the call`,
    describe,
    test,
    expect,
    createDriver: pushDriver(server),
    supports: ['reject'],
  });
}

runApprovalCases({
  name: 'mcp: sdk 2.x 2026-07-28 Streamable HTTP, input_required answered by the client',
  describe,
  test,
  expect,
  createDriver: multiRoundTripDriver(),
  supports: ['reject', 'approveEdited', 'forge'],
});
