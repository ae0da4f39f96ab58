/**
 * Approvals over MCP elicitation, through real clients and servers: 1.x in memory (push-style
 * `elicitation/create` during the call), 2.x over Streamable HTTP on 127.0.0.1 speaking
 * 2026-07-28 (an `input_required` round the client answers by retrying), the 2.x server on a
 * 2025 connection (its legacy leg). The clients answer accept / decline / cancel.
 */
import { randomUUID } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type IdempotentServerOptions,
  idempotentServer,
  REPLAYED_META,
  TURN_ID_META,
} from './index.js';
import {
  type Asker,
  asker,
  connectAsking,
  connectHttpAsking,
  connectModernAsking,
  createPayments,
} from './test-utils/approval-app.js';
import { callTool, modelError, texts } from './test-utils/helpdesk.js';
import { startHttpServer } from './test-utils/http.js';
import { startModernServer } from './test-utils/modern.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const refund = { order: 'A-42', amount: 30 };

function setup(options: Partial<IdempotentServerOptions> = {}) {
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const runs: Record<string, number> = {};
  const serverOptions = { idempotency, ...options } as IdempotentServerOptions;
  const connect = async (
    user: Asker | undefined,
    bare?: McpServer,
    connection: { sessionId?: string; name?: string } = { sessionId: 'session-1' },
  ) => {
    const client = await connectAsking(createPayments(runs, serverOptions, bare), user, connection);
    cleanups.push(() => client.close());
    return client;
  };
  return { idempotency, runs, connect };
}

describe('@modelcontextprotocol/sdk 1.x: elicitation/create during the call', () => {
  it('accept: the tool runs once, after the approval; a retry replays without asking again', async () => {
    const { runs, connect } = setup();
    const user = asker('accept');
    const client = await connect(user);
    const meta = { [TURN_ID_META]: randomUUID() };

    const first = await callTool(client, 'refund', refund, meta);
    expect(texts(first)).toEqual(['refunded 30 on A-42 #1']);
    expect(user.asked).toHaveLength(1);
    expect(user.asked[0]?.message).toBe(`Refund this order?\n\n${JSON.stringify(refund, null, 2)}`);

    // The client re-sends the tools/call (its reply was lost): nothing runs, nothing is asked.
    const retry = await callTool(client, 'refund', refund, meta);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.refund).toBe(1);
    expect(user.asked).toHaveLength(1);
  });

  it('decline: a stored rejection the model reads (isError), the same on every retry, nothing ran', async () => {
    const { runs, connect } = setup();
    const user = asker('decline', 'accept');
    const client = await connect(user);
    const meta = { [TURN_ID_META]: randomUUID() };

    const declined = await callTool(client, 'refund', refund, meta);
    expect(declined.isError).toBe(true);
    const error = modelError(declined);
    expect(error).toMatchObject({ error: 'approval_rejected', next: 'do-not-retry' });
    expect(error?.message).toContain(
      'refund was rejected by mcp-client approval-client session=session-1: the user declined it.',
    );

    const again = await callTool(client, 'refund', refund, meta);
    expect(modelError(again)).toEqual(error);
    expect(runs.refund).toBeUndefined();
    expect(user.asked).toHaveLength(1); // the decision is stored: not asked again
  });

  it('cancel: nothing is decided, the call is pending (retry later); the next call asks again', async () => {
    const { runs, connect } = setup();
    const user = asker('cancel', 'accept');
    const client = await connect(user);
    const meta = { [TURN_ID_META]: randomUUID() };

    const cancelled = await callTool(client, 'refund', refund, meta);
    expect(modelError(cancelled)).toMatchObject({ error: 'approval_pending', next: 'retry-later' });
    expect(runs.refund).toBeUndefined();

    const accepted = await callTool(client, 'refund', refund, meta);
    expect(texts(accepted)).toEqual(['refunded 30 on A-42 #1']);
    expect(user.asked).toHaveLength(2);
    expect(runs.refund).toBe(1);
  });

  it('an approval never authorises other arguments: they are asked for on their own', async () => {
    const { runs, connect } = setup();
    const user = asker('accept', 'decline');
    const client = await connect(user);
    const meta = { [TURN_ID_META]: randomUUID() };

    await callTool(client, 'refund', refund, meta);
    const other = await callTool(client, 'refund', { ...refund, amount: 3000 }, meta);
    expect(modelError(other)).toMatchObject({ error: 'approval_rejected' });
    expect(user.asked.map((asked) => asked.message)).toEqual([
      `Refund this order?\n\n${JSON.stringify(refund, null, 2)}`,
      `Refund this order?\n\n${JSON.stringify({ ...refund, amount: 3000 }, null, 2)}`,
    ]);
    const replay = await callTool(client, 'refund', refund, meta);
    expect(replay._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.refund).toBe(1);
  });

  it('an approval is for one turn: the same refund in a new turn asks again', async () => {
    const { runs, connect } = setup();
    const user = asker('accept', 'accept');
    const client = await connect(user);
    await callTool(client, 'refund', refund, { [TURN_ID_META]: randomUUID() });
    await callTool(client, 'refund', refund, { [TURN_ID_META]: randomUUID() });
    expect(user.asked).toHaveLength(2);
    expect(runs.refund).toBe(2);
  });

  it('a read-only tool with an approval is wrapped (it asks); tools without one do not ask', async () => {
    const { runs, connect } = setup();
    const user = asker('decline');
    const client = await connect(user);
    const meta = { [TURN_ID_META]: randomUUID() };
    expect(modelError(await callTool(client, 'lookup', { card: '4242' }, meta))).toMatchObject({
      error: 'approval_rejected',
    });
    expect(texts(await callTool(client, 'note', { text: 'hi' }, meta))).toEqual(['hi #1']);
    expect(user.asked).toHaveLength(1);
    expect(runs.lookup).toBeUndefined();
  });

  it('a client without the elicitation capability: refused (nothing runs), and a warning at connect', async () => {
    const warnings: Array<{ code?: string; message: string }> = [];
    const onWarning = (warning: Error & { code?: string }) => {
      warnings.push(warning);
    };
    process.on('warning', onWarning);
    cleanups.push(async () => {
      process.off('warning', onWarning);
    });
    const { runs, connect } = setup();
    const client = await connect(undefined, undefined, { name: 'no-elicitation-client' });
    const refused = await callTool(client, 'refund', refund, { [TURN_ID_META]: randomUUID() });
    expect(modelError(refused)).toMatchObject({ error: 'configuration', next: 'do-not-retry' });
    expect(modelError(refused)?.message).toContain('cannot be asked');
    expect(runs.refund).toBeUndefined();
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on next tick
    expect(warnings.filter((w) => w.code === 'IDEMPOTENT_TOOLS_NO_ELICITATION')).toHaveLength(1);
    expect(warnings.find((w) => w.code === 'IDEMPOTENT_TOOLS_NO_ELICITATION')?.message).toContain(
      '"no-elicitation-client" did not declare the elicitation capability, so refund, lookup',
    );
  });

  it('over stateful Streamable HTTP (SSE): the question rides the call, the retry replays', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const runs: Record<string, number> = {};
    const http = await startHttpServer({
      createServer: () => createPayments(runs, { idempotency }),
    });
    cleanups.push(http.close);
    const user = asker('accept');
    const client = await connectHttpAsking(http.url, user);
    cleanups.push(() => client.close());
    const meta = { [TURN_ID_META]: randomUUID() };
    expect(texts(await callTool(client, 'refund', refund, meta))).toEqual([
      'refunded 30 on A-42 #1',
    ]);
    const retry = await callTool(client, 'refund', refund, meta);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.refund).toBe(1);
    expect(user.asked).toHaveLength(1);
  });

  it('a custom `by` is stored with the decision', async () => {
    const { connect } = setup({
      policies: { refund: { approval: { by: () => 'alice@example.com' } } },
    });
    const client = await connect(asker('decline'));
    const declined = await callTool(client, 'refund', refund, { [TURN_ID_META]: randomUUID() });
    expect(modelError(declined)?.message).toContain('rejected by alice@example.com');
  });
});

describe('options checked when the server is wrapped', () => {
  const wrap = (options: Record<string, unknown>) => () =>
    idempotentServer(new ModernMcpServer({ name: 'm', version: '1.0.0' }), {
      store: createMemoryStore(),
      ...options,
    } as IdempotentServerOptions);

  it('misspelt fields get a did-you-mean; an approval on an unsafe or excluded tool is refused', () => {
    expect(wrap({ policies: { refund: { aproval: true } } })).toThrow(
      'policies.refund: unknown option "aproval"; did you mean "approval"?',
    );
    expect(wrap({ policies: { refund: { approval: { mesage: 'Go?' } } } })).toThrow(
      'unknown option "mesage"; did you mean "message"?',
    );
    expect(wrap({ policies: { refund: { approval: { timeout: -1 } } } })).toThrow(
      ConfigurationError,
    );
    expect(wrap({ policies: { refund: { approval: 'yes' } } })).toThrow(
      'must be true or { message?, by?, timeout? }',
    );
    expect(wrap({ unsafe: ['refund'], policies: { refund: { approval: true } } })).toThrow(
      'refund is in unsafe, so it runs without the wrapper and never asks',
    );
    expect(wrap({ policies: { refund: { approval: true, ttl: 60_000 } } })).not.toThrow();
    expect(wrap({ policies: { refund: { ttll: 1 } } })).toThrow('did you mean "ttl"?');
  });
});

describe('@modelcontextprotocol/server 2.x', () => {
  async function serveModern(user: Asker | undefined) {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const runs: Record<string, number> = {};
    const bare = () => new ModernMcpServer({ name: 'payments', version: '1.0.0' });
    const http = await startModernServer({
      createServer: () => createPayments(runs, { idempotency }, bare() as unknown as McpServer),
      json: true,
    });
    cleanups.push(http.close);
    const client = await connectModernAsking(http.url, user);
    cleanups.push(() => client.close());
    return { runs, client, http };
  }

  it('2026-07-28 over HTTP: an input_required round; accept runs once, a retry replays without asking', async () => {
    const user = asker('accept');
    const { runs, client, http } = await serveModern(user);
    const meta = { [TURN_ID_META]: randomUUID() };
    const first = await callTool(client, 'refund', refund, meta);
    expect(texts(first)).toEqual(['refunded 30 on A-42 #1']);
    expect(user.asked).toEqual([
      { message: `Refund this order?\n\n${JSON.stringify(refund, null, 2)}`, mode: 'form' },
    ]);
    // Two tools/call requests: the question, then the retry carrying the answer.
    expect(http.requests.filter((r) => r.method === 'tools/call')).toHaveLength(2);

    const retry = await callTool(client, 'refund', refund, meta);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.refund).toBe(1);
    expect(user.asked).toHaveLength(1);
  });

  it('2026-07-28: decline is a stored rejection, cancel leaves it pending', async () => {
    const user = asker('cancel', 'decline');
    const { runs, client } = await serveModern(user);
    const meta = { [TURN_ID_META]: randomUUID() };
    const cancelled = await callTool(client, 'refund', refund, meta);
    expect(modelError(cancelled)).toMatchObject({ error: 'approval_pending' });
    const declined = await callTool(client, 'refund', refund, meta);
    expect(modelError(declined)).toMatchObject({ error: 'approval_rejected' });
    expect(modelError(declined)?.message).toContain('mcp-client modern-approval-client');
    const again = await callTool(client, 'refund', refund, meta);
    expect(modelError(again)).toMatchObject({ error: 'approval_rejected' });
    expect(user.asked).toHaveLength(2);
    expect(runs.refund).toBeUndefined();
  });

  it('2026-07-28: a client without the elicitation capability is refused, nothing runs', async () => {
    const { runs, client } = await serveModern(undefined);
    const refused = await callTool(client, 'refund', refund, { [TURN_ID_META]: randomUUID() });
    expect(modelError(refused)).toMatchObject({ error: 'configuration' });
    expect(runs.refund).toBeUndefined();
  });

  it('the 2.x server on a 2025 connection (legacy leg): the same flow', async () => {
    const { runs, connect } = setup();
    const user = asker('accept');
    const client = await connect(
      user,
      new ModernMcpServer({ name: 'payments', version: '1.0.0' }) as unknown as McpServer,
    );
    const meta = { [TURN_ID_META]: randomUUID() };
    expect(texts(await callTool(client, 'refund', refund, meta))).toEqual([
      'refunded 30 on A-42 #1',
    ]);
    const retry = await callTool(client, 'refund', refund, meta);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.refund).toBe(1);
    expect(user.asked).toHaveLength(1);
  });
});
