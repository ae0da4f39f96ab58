/**
 * `mcpToTool` of @google/genai over a real MCP client and server (the MCP SDK, in-memory
 * transport), wrapped with `idempotentCallableTool`, through the SDK's automatic function
 * calling against the scripted Gemini server: the MCP tool's side effect runs once per logical
 * call, replays carry `replayed: true`.
 */
import { mcpToTool } from '@google/genai';
import { createMemoryStore } from '@idempotent-tools/core';
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/gemini';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, expect, test } from 'vitest';
import { z } from 'zod';
import { idempotentCallableTool } from './index.js';
import { client, MODEL, user } from './test-utils/app.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function mcpTickets() {
  const tickets: string[] = [];
  const server = new McpServer({ name: 'tickets', version: '1.0.0' });
  server.registerTool(
    'create_ticket',
    { description: 'Open a support ticket.', inputSchema: { title: z.string() } },
    async ({ title }) => {
      tickets.push(title);
      const ticket = { ticket: `T-${tickets.length}`, title };
      return { content: [{ type: 'text', text: JSON.stringify(ticket) }] };
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const mcp = new Client({ name: 'agent', version: '1.0.0' });
  await Promise.all([server.connect(serverSide), mcp.connect(clientSide)]);
  closers.push(async () => {
    await mcp.close();
    await server.close();
  });
  return { tickets, mcp };
}

test('mcpToTool, wrapped: a lost reply retried and a repeated call replay, one MCP side effect', async () => {
  const { tickets, mcp } = await mcpTickets();
  const gemini: ScriptedServer = await startScriptedServer({
    respond: (turn) =>
      turn.functionResponses.length < 2
        ? { functionCalls: [{ name: 'create_ticket', args: { title: turn.userText } }] }
        : { text: 'Done.' },
  });
  closers.push(() => gemini.close());
  const tools = await idempotentCallableTool(mcpToTool(mcp), { store: createMemoryStore() });
  const declaration = (await tools.callable({ turnId: 't' }).tool()).functionDeclarations?.[0];
  expect(declaration?.description).toMatch(/^Open a support ticket\.\n\nSafe to retry/);

  const ai = client(gemini.baseUrl);
  const contents = [user('Printer on fire')];
  const send = () =>
    ai.models.generateContent({
      model: MODEL,
      contents,
      config: { tools: [tools.callable({ contents, conversationId: 'chat-1' })] },
    });
  gemini.inject(undefined, undefined, 'truncate'); // the reply after the model's repeat is cut
  await expect(send()).rejects.toThrow();
  const response = await send();
  expect(response.text).toBe('Done.');
  expect(tickets).toEqual(['Printer on fire']);

  const sent = gemini.requests.at(-1)?.body as {
    contents: Array<{ parts: Array<{ functionResponse?: { response: unknown } }> }>;
  };
  const responses = sent.contents.flatMap((c) => c.parts.flatMap((p) => p.functionResponse ?? []));
  // The MCP result (content blocks) as mcpToTool answers it, then replayed with the mark.
  expect(responses[0]?.response).toMatchObject({
    content: [{ type: 'text', text: '{"ticket":"T-1","title":"Printer on fire"}' }],
  });
  expect(responses[1]?.response).toMatchObject({ replayed: true, content: [{ type: 'text' }] });
});
