import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createIdempotency, createMemoryStore, REPLAYED_META, TURN_ID_META } from './index.js';
import { createHelpdesk, type Runs, texts } from './test-utils/helpdesk.js';
import { connectHttp, type HttpServerOptions, startHttpServer } from './test-utils/http.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(options: Omit<HttpServerOptions, 'createServer'> = {}) {
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const runs: Runs = {};
  const http = await startHttpServer({
    ...options,
    createServer: () => createHelpdesk(runs, { idempotency }),
  });
  cleanups.push(http.close);
  const connect = async () => {
    const connection = await connectHttp(http.url);
    cleanups.push(() => connection.client.close());
    return connection;
  };
  return { runs, http, connect };
}

const createTicket = (client: Client, meta?: Record<string, unknown>, timeout?: number) =>
  client.callTool(
    {
      name: 'create_ticket',
      arguments: { title: 'Printer on fire' },
      ...(meta === undefined ? {} : { _meta: meta }),
    },
    undefined,
    timeout === undefined ? {} : { timeout },
  ) as Promise<CallToolResult>;

describe('Streamable HTTP on 127.0.0.1: a retry after a lost response is a replay', () => {
  it('JSON responses: the socket is destroyed after the tool ran; the retry (new JSON-RPC id) replays', async () => {
    const { runs, http, connect } = await setup({ json: true });
    const { client, sessionId } = await connect();
    expect(sessionId()).toBeDefined();

    http.dropNextResult();
    await expect(createTicket(client)).rejects.toThrow(/fetch failed/);
    expect(http.dropped()).toBe(1);
    expect(runs.create_ticket).toBe(1);

    const retry = await createTicket(client);
    expect(runs.create_ticket).toBe(1);
    expect(retry._meta).toEqual({ [REPLAYED_META]: true });
    expect(texts(retry)).toEqual(['Created ticket T-1: Printer on fire\n\n{"replayed":true}']);
    expect(retry.structuredContent).toMatchObject({ ticketId: 'T-1', replayed: true });

    const calls = http.requests.filter((request) => request.method === 'tools/call');
    expect(calls).toHaveLength(2);
    expect(calls[0]?.id).not.toBe(calls[1]?.id);
  });

  it('SSE (the SDK default): the stream is cut after the tool ran; the retry replays', async () => {
    const { runs, http, connect } = await setup();
    const { client } = await connect();

    http.dropNextResult();
    // SDK >= 1.2x flushes the SSE headers first (the client times out); older ones do not.
    await expect(createTicket(client, undefined, 300)).rejects.toThrow(/timed out|fetch failed/);
    expect(http.dropped()).toBe(1);
    expect(runs.create_ticket).toBe(1);

    const retry = await createTicket(client);
    expect(runs.create_ticket).toBe(1);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
  });

  it('parallel duplicates in one session run once', async () => {
    const { runs, connect } = await setup();
    const { client } = await connect();
    const results = await Promise.all([1, 2, 3, 4].map(() => createTicket(client)));
    expect(runs.create_ticket).toBe(1);
    expect(results.filter((result) => result._meta?.[REPLAYED_META] === true)).toHaveLength(3);
  });

  it('another session runs again', async () => {
    const { runs, connect } = await setup();
    const alice = await connect();
    const bob = await connect();
    expect(alice.sessionId()).not.toBe(bob.sessionId());
    await createTicket(alice.client);
    const bobs = await createTicket(bob.client);
    const alices = await createTicket(alice.client);
    expect(runs.create_ticket).toBe(2);
    expect(bobs._meta).toBeUndefined();
    expect(alices._meta?.[REPLAYED_META]).toBe(true);
  });

  it('stateless server (no session): a _meta turn id keys the call; another turn runs again', async () => {
    const { runs, http, connect } = await setup({ stateless: true, json: true });
    const { client, sessionId } = await connect();
    expect(sessionId()).toBeUndefined();
    const turn = randomUUID();

    http.dropNextResult();
    await expect(createTicket(client, { [TURN_ID_META]: turn })).rejects.toThrow();
    const retry = await createTicket(client, { [TURN_ID_META]: turn });
    const nextTurn = await createTicket(client, { [TURN_ID_META]: randomUUID() });
    expect(runs.create_ticket).toBe(2);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(nextTurn._meta).toBeUndefined();
  });
});
