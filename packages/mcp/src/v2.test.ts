/**
 * The adapter on `@modelcontextprotocol/server` 2.x (its server runs a tool's `executor`, and
 * hands it `ctx`), through a real 2.x client speaking 2026-07-28 over Streamable HTTP.
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createIdempotency,
  createMemoryStore,
  idempotencyContext,
  idempotentServer,
  REPLAYED_META,
  RETRY_SAFE_NOTE,
  TURN_ID_META,
} from './index.js';
import { callTool, texts } from './test-utils/helpdesk.js';
import { connectModern, startModernServer } from './test-utils/modern.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(createServer: () => McpServer) {
  const http = await startModernServer({ createServer, json: true });
  cleanups.push(http.close);
  const client = await connectModern(http.url);
  cleanups.push(() => client.close());
  return client;
}

describe('@modelcontextprotocol/server 2.x', () => {
  it('tools registered before idempotentServer, and after update({ callback, name }), are wrapped', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const counts = { early: 0, updated: 0 };
    const client = await serve(() => {
      const server = new McpServer({ name: 'm', version: '1.0.0' });
      const early = server.registerTool('early', { description: 'Early.' }, async () => ({
        content: [{ type: 'text', text: `early ${++counts.early}` }],
      }));
      idempotentServer(server, { idempotency });
      early.update({
        name: 'renamed',
        callback: async () => ({
          content: [{ type: 'text', text: `updated ${++counts.updated}` }],
        }),
      });
      return server;
    });
    const meta = { [TURN_ID_META]: randomUUID() };
    await callTool(client, 'renamed', {}, meta);
    const replay = await callTool(client, 'renamed', {}, meta);
    expect(counts).toEqual({ early: 0, updated: 1 });
    expect(texts(replay)).toEqual(['updated 1\n\n{"replayed":true}']);
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === 'renamed')?.description).toBe(
      `Early.\n\n${RETRY_SAFE_NOTE}`,
    );
  });

  it('idempotencyContext(ctx) gives the key; ctx.mcpReq.signal is a live signal; a thrown error is not stored', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const client = await serve(() => {
      const server = idempotentServer(new McpServer({ name: 'm', version: '1.0.0' }), {
        idempotency,
      });
      server.registerTool(
        'export',
        { inputSchema: z.object({ format: z.string() }) },
        async ({ format }, ctx) => {
          runs++;
          if (runs === 1) throw new Error('export service timed out');
          const key = idempotencyContext(ctx)?.key;
          return {
            content: [
              { type: 'text', text: `${format} ${key} aborted=${ctx.mcpReq.signal.aborted}` },
            ],
          };
        },
      );
      return server;
    });
    const meta = { [TURN_ID_META]: randomUUID() };
    const failed = await callTool(client, 'export', { format: 'csv' }, meta);
    expect(failed).toMatchObject({
      isError: true,
      content: [{ type: 'text', text: 'export service timed out' }],
    });
    const fresh = await callTool(client, 'export', { format: 'csv' }, meta);
    const replay = await callTool(client, 'export', { format: 'csv' }, meta);
    expect(runs).toBe(2);
    expect(texts(fresh)[0]).toMatch(/^csv v1_[A-Za-z0-9_-]{43} aborted=false$/);
    expect(replay._meta?.[REPLAYED_META]).toBe(true);
  });
});
