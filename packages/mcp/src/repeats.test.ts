/**
 * Deliberate repeats through real MCP clients: 1.x in memory, 2.x over Streamable HTTP. Two
 * identical calls of one turn are one (replayed); `repeat: 2` is a second effect; its retry is
 * replayed; the tool never sees `repeat`; the schema clients list has it only when asked for.
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import * as z3 from 'zod/v3';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type IdempotentServerOptions,
  idempotentServer,
  TURN_ID_META,
} from './index.js';
import { callTool, connectInMemory, texts } from './test-utils/helpdesk.js';
import { connectModern, startModernServer } from './test-utils/modern.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Client = Awaited<ReturnType<typeof connectInMemory>>;
type Sdk = 'sdk 1.x' | 'server 2.x';

/** A reminder server on either SDK; `sent` holds the arguments every run of the tool got. */
function reminders(sdk: Sdk, options: Partial<IdempotentServerOptions>, schema?: unknown) {
  const sent: unknown[] = [];
  const bare =
    sdk === 'sdk 1.x'
      ? new McpServer({ name: 'reminders', version: '1.0.0' })
      : (new ModernMcpServer({ name: 'reminders', version: '1.0.0' }) as unknown as McpServer);
  const server = idempotentServer(bare, {
    idempotency: createIdempotency({ store: createMemoryStore() }),
    ...options,
  });
  server.registerTool(
    'send_reminder',
    {
      description: 'Send a reminder.',
      inputSchema: (schema ?? z.object({ to: z.string() })) as never,
    },
    (async (args: unknown) => {
      sent.push(args);
      return { content: [{ type: 'text', text: `reminder ${sent.length}` }] };
    }) as never,
  );
  server.registerTool('ping', { description: 'Ping.' }, async (...params: unknown[]) => {
    sent.push(params.length);
    return { content: [{ type: 'text', text: `ping ${sent.length}` }] };
  });
  return { server, sent };
}

async function connect(sdk: Sdk, server: McpServer): Promise<Client> {
  if (sdk === 'sdk 1.x') {
    const client = await connectInMemory(server);
    cleanups.push(() => client.close());
    return client;
  }
  const http = await startModernServer({ createServer: () => server, json: true });
  cleanups.push(http.close);
  const client = await connectModern(http.url);
  cleanups.push(() => client.close());
  return client as unknown as Client;
}

const repeatable = {
  policies: { send_reminder: { repeatable: true }, ping: { repeatable: true } },
};

describe.each(['sdk 1.x', 'server 2.x'] as const)('deliberate repeats, %s', (sdk) => {
  test('same call twice in a turn: one effect, replayed; repeat 2: a second; its retry: replayed', async () => {
    const { server, sent } = reminders(sdk, repeatable);
    const client = await connect(sdk, server);
    const meta = { [TURN_ID_META]: randomUUID() };
    const call = (args: Record<string, unknown>) => callTool(client, 'send_reminder', args, meta);
    const results = [
      await call({ to: 'ann' }),
      await call({ to: 'ann' }),
      await call({ to: 'ann', repeat: 2 }),
      await call({ to: 'ann', repeat: 2 }),
    ];
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]); // the tool never sees `repeat`
    expect(results.map((r) => texts(r)[0])).toEqual([
      'reminder 1',
      'reminder 1\n\n{"replayed":true}',
      'reminder 2',
      'reminder 2\n\n{"replayed":true}',
    ]);
    // A tool without arguments keeps its one-parameter callback.
    await callTool(client, 'ping', {}, meta);
    await callTool(client, 'ping', { repeat: 2 }, meta);
    expect(sent.slice(2)).toEqual([1, 1]);
  });

  test('the schema and description clients list: the argument only when the option is on', async () => {
    const on = await connect(sdk, reminders(sdk, repeatable).server);
    const tool = (await on.listTools()).tools.find((t) => t.name === 'send_reminder');
    expect(tool?.inputSchema.properties).toMatchObject({
      to: { type: 'string' },
      repeat: { type: 'integer', minimum: 1 },
    });
    expect(tool?.inputSchema.required).toEqual(['to']);
    expect(tool?.description).toContain('To do it again on purpose, pass repeat: 2 (3, ...).');
    const off = await connect(sdk, reminders(sdk, {}).server);
    const plain = (await off.listTools()).tools.find((t) => t.name === 'send_reminder');
    expect(Object.keys(plain?.inputSchema.properties ?? {})).toEqual(['to']);
    expect(plain?.description).not.toContain('repeat: 2');
  });

  test('an invalid repeat: an error result for the model, nothing ran', async () => {
    const { server, sent } = reminders(sdk, repeatable);
    const client = await connect(sdk, server);
    const meta = { [TURN_ID_META]: randomUUID() };
    for (const repeat of [0, 1.5, 'two']) {
      const result = await callTool(client, 'send_reminder', { to: 'ann', repeat }, meta);
      expect(result.isError).toBe(true);
      expect(texts(result).join(' ')).toMatch(/repeat/);
    }
    expect(sent).toEqual([]);
  });

  test('a tool whose own schema has `repeat` is refused when it is registered', () => {
    const own = z.object({ to: z.string(), repeat: z.boolean() });
    expect(() => reminders(sdk, repeatable, own)).toThrow(ConfigurationError);
    expect(() => reminders(sdk, repeatable, own)).toThrow(/has its own "repeat"/);
  });
});

test('sdk 1.x: a zod 3 object schema gets the argument too', async () => {
  const { server, sent } = reminders('sdk 1.x', repeatable, z3.object({ to: z3.string() }));
  const client = await connect('sdk 1.x', server);
  const tool = (await client.listTools()).tools.find((t) => t.name === 'send_reminder');
  expect(Object.keys(tool?.inputSchema.properties ?? {})).toEqual(['to', 'repeat']);
  const meta = { [TURN_ID_META]: randomUUID() };
  await callTool(client, 'send_reminder', { to: 'bo' }, meta);
  await callTool(client, 'send_reminder', { to: 'bo', repeat: 2 }, meta);
  expect(sent).toEqual([{ to: 'bo' }, { to: 'bo' }]);
});
