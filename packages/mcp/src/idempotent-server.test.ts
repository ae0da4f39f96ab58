import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { McpServer as ModernMcpServer } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  IDEMPOTENCY_KEY_META,
  type IdempotentServerOptions,
  InvalidInputError,
  idempotentRegisterTool,
  idempotentServer,
  REPLAYED_META,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
  ToolResultError,
  TURN_ID_META,
} from './index.js';
import {
  callTool,
  connectInMemory,
  createHelpdesk,
  modelError,
  type Runs,
  texts,
} from './test-utils/helpdesk.js';

/** A replayed text block: the original text, then the mark on a line of its own. */
const replayedText = (text: string) => ({ type: 'text', text: `${text}\n\n{"replayed":true}` });

function setup(options: Partial<IdempotentServerOptions> = {}) {
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const runs: Runs = {};
  const serverOptions = {
    idempotency,
    unsafe: ['ping_oncall'],
    policies: { create_user: { businessKey: (args: Record<string, unknown>) => args.email } },
    ...options,
  } as IdempotentServerOptions;
  // An in-memory connection with a session id: what a stateful Streamable HTTP session is.
  const connect = (sessionId = 'session-default') =>
    connectInMemory(createHelpdesk(runs, serverOptions), { sessionId });
  return { idempotency, runs, connect };
}

describe('tools/list: what the client and the model read', () => {
  it('wrapped tools get the retry note; idempotentHint only with a business key; read-only, unsafe and excluded tools are told apart', async () => {
    const { connect } = setup({ exclude: ['close_all'] });
    const client = await connect();
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));

    expect(byName.create_ticket?.annotations).toBeUndefined();
    expect(byName.create_user?.annotations).toEqual({ idempotentHint: true });
    expect(byName.create_ticket?.description).toBe(`Open a support ticket.\n\n${RETRY_SAFE_NOTE}`);
    expect(byName.ping_oncall?.annotations).toEqual({ idempotentHint: false });
    expect(byName.ping_oncall?.description).toBe(
      `Page the on-call engineer.\n\n${RETRY_UNSAFE_NOTE}`,
    );
    expect(byName.list_tickets?.annotations).toEqual({ readOnlyHint: true });
    expect(byName.list_tickets?.description).toBe('List tickets.');
    expect(byName.close_all?.annotations).toBeUndefined();
    expect(byName.close_all?.description).toBe('Close every open ticket.');
  });

  it('wrapReadOnly wraps read-only tools too', async () => {
    const { connect, runs } = setup({ wrapReadOnly: true });
    const client = await connect();
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === 'list_tickets')?.annotations).toEqual({
      readOnlyHint: true,
    });
    await callTool(client, 'list_tickets');
    const again = await callTool(client, 'list_tickets');
    expect(runs.list_tickets).toBe(1);
    expect(again.content).toEqual([replayedText('list #1')]);
  });
});

describe('(1) the same call again: one execution, the repeat says replayed', () => {
  it('a retry with a new JSON-RPC id replays the stored result in content, _meta and structuredContent', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const first = await callTool(client, 'create_ticket', { title: 'Printer on fire' });
    const second = await callTool(client, 'create_ticket', { title: 'Printer on fire' });

    expect(runs.create_ticket).toBe(1);
    expect(first).toEqual({
      content: [{ type: 'text', text: 'Created ticket T-1: Printer on fire' }],
      structuredContent: {
        ticketId: 'T-1',
        title: 'Printer on fire',
        priority: 'low',
        key: expect.stringMatching(/^v1_/),
      },
    });
    expect(second).toEqual({
      content: [replayedText('Created ticket T-1: Printer on fire')],
      structuredContent: { ...first.structuredContent, replayed: true },
      _meta: { [REPLAYED_META]: true },
    });
  });

  it('the parsed args are the key: a default filled in by the schema is the same call', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    await callTool(client, 'create_ticket', { title: 'VPN down' });
    const again = await callTool(client, 'create_ticket', { title: 'VPN down', priority: 'low' });
    const other = await callTool(client, 'create_ticket', { title: 'VPN down', priority: 'high' });
    expect(runs.create_ticket).toBe(2);
    expect(again._meta?.[REPLAYED_META]).toBe(true);
    expect(other._meta).toBeUndefined();
  });

  it('an output schema that declares replayed gets it in structuredContent; one that does not is left valid', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    await client.listTools(); // the client validates structuredContent against these schemas
    await callTool(client, 'charge_card', { amount: 1999 });
    const charge = await callTool(client, 'charge_card', { amount: 1999 });
    await callTool(client, 'send_email', { to: 'a@example.com' });
    const email = await callTool(client, 'send_email', { to: 'a@example.com' });

    expect(runs).toEqual({ charge_card: 1, send_email: 1 });
    expect(charge.structuredContent).toEqual({ chargeId: 'ch_1', amount: 1999, replayed: true });
    expect(email.structuredContent).toEqual({ messageId: 'm_1' });
    expect(email._meta).toEqual({ [REPLAYED_META]: true });
    expect(email.content).toEqual([replayedText('m_1')]);
    // A text block that is a JSON object gets the field, and stays JSON.
    expect(charge.content).toEqual([
      { type: 'text', text: '{"chargeId":"ch_1","amount":1999,"replayed":true}' },
    ]);
  });

  it('a tool without an input schema is keyed by its name and session', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const first = await callTool(client, 'close_all');
    const second = await callTool(client, 'close_all');
    expect(runs.close_all).toBe(1);
    expect(texts(first)[0]).toMatch(/^closed #1 v1_/);
    expect(texts(second)).toEqual([`${texts(first)[0]}\n\n{"replayed":true}`]);
  });

  it('markFresh marks fresh results replayed: false', async () => {
    const { connect } = setup({ markFresh: true });
    const client = await connect();
    const first = await callTool(client, 'charge_card', { amount: 5 });
    expect(first.structuredContent).toEqual({ chargeId: 'ch_1', amount: 5, replayed: false });
    expect(first._meta).toEqual({ [REPLAYED_META]: false });
    expect(first.content).toEqual([
      { type: 'text', text: '{"chargeId":"ch_1","amount":5,"replayed":false}' },
    ]);
  });
});

describe('(2) identical calls in parallel', () => {
  it('run once; the duplicates wait and replay', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const results = await Promise.all(
      [1, 2, 3].map(() => callTool(client, 'create_ticket', { title: 'Disk full' })),
    );
    expect(runs.create_ticket).toBe(1);
    expect(results.map((result) => result._meta?.[REPLAYED_META] ?? false).sort()).toEqual([
      false,
      true,
      true,
    ]);
    for (const result of results) {
      expect(texts(result)[0]?.split('\n')[0]).toBe('Created ticket T-1: Disk full');
    }
  });
});

describe('(3) a new session, turn or key runs again', () => {
  it('another session id runs again; the same session replays', async () => {
    const { connect, runs } = setup();
    const alice = await connect('session-a');
    const bob = await connect('session-b');
    await callTool(alice, 'create_ticket', { title: 'Badge broken' });
    const bobs = await callTool(bob, 'create_ticket', { title: 'Badge broken' });
    const alices = await callTool(alice, 'create_ticket', { title: 'Badge broken' });
    expect(runs.create_ticket).toBe(2);
    expect(bobs._meta).toBeUndefined();
    expect(texts(bobs)[0]).toBe('Created ticket T-2: Badge broken');
    expect(alices._meta?.[REPLAYED_META]).toBe(true);
  });

  it('a _meta turn id outlives the session: a new connection in the same turn replays', async () => {
    const { connect, runs } = setup();
    const turn = randomUUID();
    const before = await connect('session-before-reconnect');
    await callTool(before, 'create_ticket', { title: 'Laptop stolen' }, { [TURN_ID_META]: turn });
    const after = await connect('session-after-reconnect');
    const replay = await callTool(
      after,
      'create_ticket',
      { title: 'Laptop stolen' },
      { [TURN_ID_META]: turn },
    );
    const nextTurn = await callTool(
      after,
      'create_ticket',
      { title: 'Laptop stolen' },
      { [TURN_ID_META]: randomUUID() },
    );
    expect(runs.create_ticket).toBe(2);
    expect(replay._meta?.[REPLAYED_META]).toBe(true);
    expect(nextTurn._meta).toBeUndefined();
  });

  it('a _meta idempotency key: same key replays (any session), a new key runs again, same key with other args is drift', async () => {
    const { connect, runs } = setup();
    const key = randomUUID();
    const one = await connect('s1');
    const two = await connect('s2');
    await callTool(one, 'create_ticket', { title: 'Coffee' }, { [IDEMPOTENCY_KEY_META]: key });
    const replay = await callTool(
      two,
      'create_ticket',
      { title: 'Coffee' },
      { [IDEMPOTENCY_KEY_META]: key },
    );
    const fresh = await callTool(
      one,
      'create_ticket',
      { title: 'Coffee' },
      { [IDEMPOTENCY_KEY_META]: randomUUID() },
    );
    const drift = await callTool(
      one,
      'create_ticket',
      { title: 'Tea' },
      { [IDEMPOTENCY_KEY_META]: key },
    );
    expect(runs.create_ticket).toBe(2);
    expect(replay._meta?.[REPLAYED_META]).toBe(true);
    expect(fresh._meta).toBeUndefined();
    expect(modelError(drift)).toMatchObject({ error: 'drift', next: 'change-arguments' });
  });

  it('scope keeps tenants apart', async () => {
    const { connect, runs } = setup({
      scope: ({ extra }) => String((extra._meta as Record<string, unknown>)?.tenant ?? 'none'),
    });
    const client = await connect();
    await callTool(client, 'create_ticket', { title: 'Badge' }, { tenant: 'acme' });
    await callTool(client, 'create_ticket', { title: 'Badge' }, { tenant: 'globex' });
    const replay = await callTool(client, 'create_ticket', { title: 'Badge' }, { tenant: 'acme' });
    expect(runs.create_ticket).toBe(2);
    expect(replay._meta?.[REPLAYED_META]).toBe(true);
  });

  it('unsafe and read-only tools run every time', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    for (let i = 0; i < 2; i++) {
      await callTool(client, 'ping_oncall');
      await callTool(client, 'list_tickets');
    }
    expect(runs).toEqual({ ping_oncall: 2, list_tickets: 2 });
  });
});

describe('(4) idempotency errors come back as isError results the model reads', () => {
  it('drift under a business key policy', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    await callTool(client, 'create_user', { email: 'ada@example.com', name: 'Ada' });
    const drift = await callTool(client, 'create_user', { email: 'ada@example.com', name: 'Ava' });
    expect(runs.create_user).toBe(1);
    expect(drift.content).toHaveLength(1);
    expect(modelError(drift)).toEqual({
      error: 'drift',
      message: expect.stringContaining('Repeat the original arguments'),
      next: 'change-arguments',
    });
  });

  it('outcome-unknown: an earlier attempt died holding the call', async () => {
    const { connect, runs, idempotency } = setup();
    const turn = randomUUID();
    const args = { title: 'Server room flooded', priority: 'low' };
    // The client's turn id, scoped by the client's name (clientInfo of the session).
    const { key, fingerprint } = idempotency.keyOf({
      toolName: 'create_ticket',
      turnId: `turn:${JSON.stringify([null, 'test-client', turn])}`,
      args,
    });
    // A holder that died: its claim was never completed and its lease ran out.
    await idempotency.store.claim({ key, fingerprint, token: 'dead', leaseMs: 1, ttlMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const client = await connect();
    const result = await callTool(client, 'create_ticket', args, { [TURN_ID_META]: turn });
    expect(runs.create_ticket).toBeUndefined();
    expect(modelError(result)).toEqual({
      error: 'outcome_unknown',
      message: expect.stringContaining('Check whether it took effect'),
      next: 'check-first',
    });
  });

  it('in-progress with onInProgress: reject', async () => {
    const { connect, runs } = setup({ policies: { create_ticket: { onInProgress: 'reject' } } });
    const client = await connect();
    const [first, second] = await Promise.all([
      callTool(client, 'create_ticket', { title: 'Slow' }),
      callTool(client, 'create_ticket', { title: 'Slow' }),
    ]);
    expect(runs.create_ticket).toBe(1);
    expect(first?.isError).toBeUndefined();
    expect(second && modelError(second)).toMatchObject({
      error: 'in_progress',
      next: 'retry-later',
    });
  });

  it('a bad _meta value is invalid input: nothing runs', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const result = await callTool(client, 'create_ticket', { title: 'x' }, { [TURN_ID_META]: 42 });
    expect(runs.create_ticket).toBeUndefined();
    expect(modelError(result)).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect(modelError(result)?.message).toContain(TURN_ID_META);
  });
});

describe("the tool's own errors", () => {
  it('a thrown error is reported by the SDK as usual and not stored: the retry runs', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const failed = await callTool(client, 'flaky_export', { format: 'csv' });
    const retried = await callTool(client, 'flaky_export', { format: 'csv' });
    expect(runs.flaky_export).toBe(2);
    expect(failed).toEqual({
      content: [{ type: 'text', text: 'export service timed out' }],
      isError: true,
    });
    expect(retried).toEqual({ content: [{ type: 'text', text: 'exported csv' }] });
  });

  it('an isError result is passed on unchanged and not stored: the retry runs', async () => {
    const { connect, runs } = setup();
    const client = await connect();
    const failed = await callTool(client, 'archive', { id: 'T-9' });
    const retried = await callTool(client, 'archive', { id: 'T-9' });
    expect(runs.archive).toBe(2);
    expect(failed).toEqual({
      content: [{ type: 'text', text: 'archive of T-9 is locked' }],
      isError: true,
    });
    expect(retried).toEqual({ content: [{ type: 'text', text: 'archived T-9' }] });
  });

  it('an isError result marked terminal is stored and replayed as do-not-retry', async () => {
    const { connect, runs } = setup({
      policies: {
        archive: { isTerminalError: (error) => error instanceof ToolResultError },
      },
    });
    const client = await connect();
    await callTool(client, 'archive', { id: 'T-9' });
    const replay = await callTool(client, 'archive', { id: 'T-9' });
    expect(runs.archive).toBe(1);
    expect(modelError(replay)).toMatchObject({ error: 'replayed_failure', next: 'do-not-retry' });
    expect(modelError(replay)?.message).toContain('archive of T-9 is locked');
  });
});

describe('registration', () => {
  it('tools registered before idempotentServer, with the deprecated tool(), and after update() are wrapped', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const counts = { early: 0, legacy: 0, updated: 0 };
    const server = new McpServer({ name: 'm', version: '1.0.0' });
    const early = server.registerTool('early', { description: 'Early.' }, async () => ({
      content: [{ type: 'text', text: `early ${++counts.early}` }],
    }));
    idempotentServer(server, { idempotency });
    server.tool('legacy', 'Legacy.', { n: z.number() }, async ({ n }) => ({
      content: [{ type: 'text', text: `legacy ${n} ${++counts.legacy}` }],
    }));
    const client = await connectInMemory(server, { sessionId: 's' });
    for (let i = 0; i < 2; i++) {
      await callTool(client, 'early');
      await callTool(client, 'legacy', { n: 1 });
    }
    expect(counts).toEqual({ early: 1, legacy: 1, updated: 0 });

    early.update({
      description: 'Renamed.',
      callback: async () => ({ content: [{ type: 'text', text: `updated ${++counts.updated}` }] }),
      name: 'renamed',
    });
    await callTool(client, 'renamed');
    const replay = await callTool(client, 'renamed');
    expect(counts.updated).toBe(1);
    expect(replay.content).toEqual([replayedText('updated 1')]);
    const { tools } = await client.listTools();
    expect(tools.find((tool) => tool.name === 'renamed')).toMatchObject({
      description: `Renamed.\n\n${RETRY_SAFE_NOTE}`,
    });

    early.update({ annotations: { readOnlyHint: true } });
    await callTool(client, 'renamed');
    expect(counts.updated).toBe(2); // read-only now: left unwrapped
  });

  it('tools made idempotent twice are refused when wrapped, on either SDK, and the tools are left as they were', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const refused = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        expect(ConfigurationError.isInstance(error)).toBe(true);
        return (error as ConfigurationError).message;
      }
      return 'not refused';
    };
    for (const make of [
      () => new McpServer({ name: 'm', version: '1.0.0' }),
      () => new ModernMcpServer({ name: 'm', version: '1.0.0' }) as unknown as McpServer,
    ]) {
      // The same server twice.
      const twice = idempotentServer(make(), { idempotency });
      expect(refused(() => idempotentServer(twice, { idempotency }))).toMatch(
        /already made idempotent/,
      );
      expect(refused(() => idempotentRegisterTool(twice, { idempotency }))).toMatch(
        /already made idempotent/,
      );

      // Tools an idempotentRegisterTool made, then the whole server: refused, nothing changed.
      const server = make();
      const registerTool = idempotentRegisterTool(server, { idempotency });
      let runs = 0;
      registerTool('charge', { inputSchema: { n: z.number() } }, async ({ n }) => ({
        content: [{ type: 'text', text: `charged ${n} #${++runs}` }],
      }));
      expect(refused(() => idempotentServer(server, { idempotency }))).toMatch(
        /tool "charge" is already idempotent/,
      );
      const client = await connectInMemory(server, { sessionId: 's' });
      const meta = { [TURN_ID_META]: randomUUID() };
      await callTool(client, 'charge', { n: 1 }, meta);
      const again = await callTool(client, 'charge', { n: 1 }, meta);
      expect(again._meta?.[REPLAYED_META]).toBe(true); // still wrapped once, still working
      expect(runs).toBe(1);
      await client.close();

      // A callback idempotency.wrap made, registered on an idempotent server.
      const wrappedFn = idempotency.wrap('charge', async () => ({ content: [] }));
      const other = idempotentServer(make(), { idempotency });
      expect(
        refused(() => other.registerTool('charge', { description: 'Charge.' }, wrappedFn as never)),
      ).toMatch(/tool "charge" is already idempotent/);
    }
  });

  it('idempotentRegisterTool wraps only the tools registered through it', async () => {
    const store = createMemoryStore();
    const server = new McpServer({ name: 'm', version: '1.0.0' });
    const counts = { wrapped: 0, plain: 0 };
    const registerTool = idempotentRegisterTool(server, {
      store,
      policies: { wrapped: { ttl: 60_000 } },
    });
    registerTool('wrapped', { inputSchema: { x: z.string() } }, async ({ x }) => ({
      content: [{ type: 'text', text: `${x} ${++counts.wrapped}` }],
    }));
    server.registerTool('plain', { inputSchema: { x: z.string() } }, async ({ x }) => ({
      content: [{ type: 'text', text: `${x} ${++counts.plain}` }],
    }));
    const client = await connectInMemory(server, { sessionId: 's' });
    for (let i = 0; i < 2; i++) {
      await callTool(client, 'wrapped', { x: 'a' });
      await callTool(client, 'plain', { x: 'a' });
    }
    expect(counts).toEqual({ wrapped: 1, plain: 2 });
  });

  it('bad options fail when the server is wrapped, with a ConfigurationError naming the option', () => {
    const store = createMemoryStore();
    const server = new McpServer({ name: 'm', version: '1.0.0' });
    const optionOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        // Executor options (ttl, lease...) are checked by core: InvalidInputError naming the field.
        if (InvalidInputError.isInstance(error)) return error.field;
        expect(ConfigurationError.isInstance(error)).toBe(true);
        return (error as ConfigurationError).option;
      }
      return undefined;
    };
    expect(optionOf(() => idempotentServer({} as McpServer, { store }))).toBe('server');
    expect(optionOf(() => idempotentServer(server, {} as IdempotentServerOptions))).toBe('store');
    expect(
      optionOf(() =>
        idempotentServer(server, {
          store,
          idempotency: createIdempotency({ store }),
        } as unknown as IdempotentServerOptions),
      ),
    ).toBe('store');
    expect(optionOf(() => idempotentServer(server, { store, exclude: ['a'], unsafe: ['a'] }))).toBe(
      'unsafe',
    );
    expect(optionOf(() => idempotentServer(server, { store, turnId: 42 as never }))).toBe('turnId');
    expect(optionOf(() => idempotentServer(server, { store, ttl: -1 }))).toBe('ttl');
    expect(optionOf(() => idempotentServer(server, { store, sessionWindow: 0 }))).toBe(
      'sessionWindow',
    );
    expect(optionOf(() => idempotentServer(server, { store, sesionWindow: 1 } as never))).toBe(
      'sesionWindow',
    );
    // Options that can never work on MCP: a conversation id (the server never sees the messages),
    // the removed noSessionTurnId (it shared one turn across clients).
    expect(optionOf(() => idempotentServer(server, { store, conversationId: 'c' } as never))).toBe(
      'conversationId',
    );
    expect(optionOf(() => idempotentServer(server, { store, noSessionTurnId: 'x' } as never))).toBe(
      'noSessionTurnId',
    );
    idempotentServer(server, { store });
    expect(optionOf(() => idempotentServer(server, { store }))).toBe('server');
    expect(optionOf(() => idempotentRegisterTool(server, { store }))).toBe('server');
  });
});

describe('the context of a wrapped call', () => {
  it('idempotencyContext(extra) gives the key to send on as a vendor Idempotency-Key', async () => {
    const { connect } = setup();
    const client = await connect();
    const first = await callTool(client, 'create_ticket', { title: 'Key' });
    const replay = await callTool(client, 'create_ticket', { title: 'Key' });
    const key = (first.structuredContent as { key: string }).key;
    expect(key).toMatch(/^v1_[A-Za-z0-9_-]{43}$/);
    expect((replay.structuredContent as { key: string }).key).toBe(key);
  });

  it('the key does not depend on the JSON-RPC id or the session transport object', async () => {
    const { connect } = setup();
    const results: CallToolResult[] = [];
    for (let i = 0; i < 2; i++) {
      const client = await connect('same-session');
      results.push(await callTool(client, 'create_ticket', { title: 'Same' }));
    }
    expect(results[1]?._meta?.[REPLAYED_META]).toBe(true);
  });
});
