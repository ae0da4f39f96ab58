/**
 * The findings of issue 15 for the MCP adapter, each through a real MCP client over real
 * Streamable HTTP on 127.0.0.1: `@modelcontextprotocol/sdk` 1.x stateful (a session per client)
 * and stateless, and `@modelcontextprotocol/server` / `client` 2.x speaking 2026-07-28 (no
 * session, per-request `_meta`).
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
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
import { callTool, createHelpdesk, modelError, type Runs, texts } from './test-utils/helpdesk.js';
import { connectHttp, startHttpServer } from './test-utils/http.js';
import { connectModern, createModernHelpdesk, startModernServer } from './test-utils/modern.js';

type Transport = 'sdk 1.x stateful' | 'sdk 1.x stateless' | 'sdk 2.x 2026-07-28';
const STATELESS: Transport[] = ['sdk 1.x stateless', 'sdk 2.x 2026-07-28'];
const ALL: Transport[] = ['sdk 1.x stateful', ...STATELESS];

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const HOUR = 60 * 60 * 1000;

/** A helpdesk served over `transport`, on a memory store whose clock the test moves. */
async function serve(transport: Transport, options: Partial<IdempotentServerOptions> = {}) {
  const clock = { now: Date.parse('2026-09-01T09:00:00Z') };
  const idempotency = createIdempotency({ store: createMemoryStore({ now: () => clock.now }) });
  const runs: Runs = {};
  const serverOptions = {
    idempotency,
    policies: { create_user: { businessKey: (args: Record<string, unknown>) => args.email } },
    ...options,
  } as IdempotentServerOptions;
  const modern = transport === 'sdk 2.x 2026-07-28';
  const createServer = () =>
    modern ? createModernHelpdesk(runs, serverOptions) : createHelpdesk(runs, serverOptions);
  const http = modern
    ? await startModernServer({ createServer, json: true })
    : await startHttpServer({
        createServer,
        json: true,
        stateless: transport === 'sdk 1.x stateless',
      });
  cleanups.push(http.close);
  /** A client app (a real SDK client over HTTP); every client of these tests has the same name. */
  const connect = async (name = 'helpdesk-app', headers?: Record<string, string>) => {
    const client = modern
      ? await connectModern(http.url, name)
      : (await connectHttp(http.url, name, headers)).client;
    cleanups.push(() => client.close());
    return client;
  };
  return { runs, http, connect, clock };
}

const ticket = { title: 'Printer on fire' };
const turn = (id: string) => ({ [TURN_ID_META]: id });

describe('finding 1: on stateless HTTP, two clients never share a turn', () => {
  for (const transport of STATELESS) {
    it(`${transport}: a second client's ticket is never the first client's replayed: calls without a turn id are refused, nothing runs`, async () => {
      const { runs, connect } = await serve(transport);
      const alice = await connect();
      const bob = await connect();
      const alices = await callTool(alice, 'create_ticket', ticket);
      const bobs = await callTool(bob, 'create_ticket', ticket);

      expect(runs.create_ticket).toBeUndefined();
      for (const result of [alices, bobs]) {
        expect(result._meta?.[REPLAYED_META]).toBeUndefined();
        expect(modelError(result)).toMatchObject({ error: 'configuration', next: 'do-not-retry' });
        expect(modelError(result)?.message).toContain(`_meta["${TURN_ID_META}"]`);
      }

      // With their own turn ids, each client gets its own ticket.
      await callTool(alice, 'create_ticket', ticket, turn(randomUUID()));
      const bobsOwn = await callTool(bob, 'create_ticket', ticket, turn(randomUUID()));
      expect(runs.create_ticket).toBe(2);
      expect(bobsOwn._meta?.[REPLAYED_META]).toBeUndefined();
      expect(texts(bobsOwn)).toEqual(['Created ticket T-2: Printer on fire']);
    });
  }

  it('sdk 1.x stateful: two clients (two sessions) with the same arguments get two tickets', async () => {
    const { runs, connect } = await serve('sdk 1.x stateful');
    const alice = await connect();
    const bob = await connect();
    await callTool(alice, 'create_ticket', ticket);
    const bobs = await callTool(bob, 'create_ticket', ticket);
    expect(runs.create_ticket).toBe(2);
    expect(bobs._meta?.[REPLAYED_META]).toBeUndefined();
  });
});

describe('finding 2: without a turn id, a session is not a turn', () => {
  it('sdk 1.x stateful: a repeat within sessionWindow is a retry (replayed); a deliberate repeat hours later runs again', async () => {
    const { runs, connect, clock } = await serve('sdk 1.x stateful');
    const client = await connect();
    await callTool(client, 'create_ticket', ticket);
    clock.now += 60_000; // the client's retry after a lost reply
    const retry = await callTool(client, 'create_ticket', ticket);
    expect(retry._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.create_ticket).toBe(1);

    clock.now += 3 * HOUR; // the user asks for the same ticket again
    const later = await callTool(client, 'create_ticket', ticket);
    expect(later._meta?.[REPLAYED_META]).toBeUndefined();
    expect(texts(later)).toEqual(['Created ticket T-2: Printer on fire']);
    expect(runs.create_ticket).toBe(2);
  });

  it('sdk 1.x stateful: sessionWindow bounds the record (just past it, the repeat runs)', async () => {
    const { runs, connect, clock } = await serve('sdk 1.x stateful', {
      sessionWindow: 10 * 60_000,
    });
    const client = await connect();
    await callTool(client, 'create_ticket', ticket);
    clock.now += 10 * 60_000 - 1;
    expect((await callTool(client, 'create_ticket', ticket))._meta?.[REPLAYED_META]).toBe(true);
    clock.now += 10 * 60_000 + 1;
    await callTool(client, 'create_ticket', ticket);
    expect(runs.create_ticket).toBe(2);
  });

  it('sdk 1.x stateful, sessionWindow: false: a call with only a session is refused; a _meta turn id is kept for the ttl', async () => {
    const { runs, connect, clock } = await serve('sdk 1.x stateful', { sessionWindow: false });
    const client = await connect();
    const refused = await callTool(client, 'create_ticket', ticket);
    expect(modelError(refused)).toMatchObject({ error: 'configuration' });
    expect(runs.create_ticket).toBeUndefined();

    const id = randomUUID();
    await callTool(client, 'create_ticket', ticket, turn(id));
    clock.now += 3 * HOUR; // the same turn, resumed hours later: still that turn's ticket
    expect((await callTool(client, 'create_ticket', ticket, turn(id)))._meta?.[REPLAYED_META]).toBe(
      true,
    );
    expect(runs.create_ticket).toBe(1);
  });

  it("sdk 1.x stateful: the server's turnId option is a turn, not a session: hours later the same turn still replays", async () => {
    const { runs, connect, clock } = await serve('sdk 1.x stateful', {
      turnId: (call) => call.header('x-turn-id'),
    });
    const client = await connect('helpdesk-app', { 'x-turn-id': 'turn-42' });
    await callTool(client, 'create_ticket', ticket);
    clock.now += 3 * HOUR;
    expect((await callTool(client, 'create_ticket', ticket))._meta?.[REPLAYED_META]).toBe(true);
    expect(runs.create_ticket).toBe(1);
  });

  for (const transport of ALL) {
    it(`${transport}: with a _meta turn id, a new user turn hours later runs again; a retry of the old turn replays`, async () => {
      const { runs, connect, clock } = await serve(transport);
      const client = await connect();
      const first = randomUUID();
      await callTool(client, 'create_ticket', ticket, turn(first));
      clock.now += 3 * HOUR;
      const next = await callTool(client, 'create_ticket', ticket, turn(randomUUID()));
      const retry = await callTool(client, 'create_ticket', ticket, turn(first));
      expect(runs.create_ticket).toBe(2);
      expect(next._meta?.[REPLAYED_META]).toBeUndefined();
      expect(retry._meta?.[REPLAYED_META]).toBe(true);
    });
  }
});

describe('finding 4: idempotentHint only where it is true', () => {
  for (const transport of ALL) {
    it(`${transport}: a tool keyed by its turn keeps its own annotations (the same arguments in a new turn run again); a business-key tool says idempotentHint: true; the owner's hint is left alone`, async () => {
      const { runs, connect } = await serve(transport);
      const client = await connect();
      const { tools } = await client.listTools();
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
      expect(byName.create_ticket?.annotations?.idempotentHint).toBeUndefined();
      expect(byName.create_user?.annotations).toEqual({ idempotentHint: true });
      expect(byName.reopen_ticket?.annotations).toEqual({ idempotentHint: true });

      // Why create_ticket may not claim it: the same arguments in another turn run again.
      await callTool(client, 'create_ticket', ticket, turn(randomUUID()));
      await callTool(client, 'create_ticket', ticket, turn(randomUUID()));
      expect(runs.create_ticket).toBe(2);
      // A business key is one call whatever the turn.
      const user = { email: 'ada@example.com', name: 'Ada' };
      await callTool(client, 'create_user', user, turn(randomUUID()));
      const again = await callTool(client, 'create_user', user, turn(randomUUID()));
      expect(runs.create_user).toBe(1);
      expect(again._meta?.[REPLAYED_META]).toBe(true);
    });
  }
});

describe('finding 5: a replay keeps the shape clients read', () => {
  for (const transport of ALL) {
    it(`${transport}: one text block carrying the mark; structuredContent kept, marked only where the output schema allows (the client validates it)`, async () => {
      const { connect } = await serve(transport);
      const client = await connect();
      await client.listTools(); // the clients validate structuredContent against these schemas
      const id = turn(randomUUID());
      await callTool(client, 'send_email', { to: 'a@example.com' }, id);
      const email = await callTool(client, 'send_email', { to: 'a@example.com' }, id);
      await callTool(client, 'charge_card', { amount: 5 }, id);
      const charge = await callTool(client, 'charge_card', { amount: 5 }, id);
      expect(email.content).toEqual([{ type: 'text', text: 'm_1\n\n{"replayed":true}' }]);
      expect(email.structuredContent).toEqual({ messageId: 'm_1' });
      expect(email._meta?.[REPLAYED_META]).toBe(true);
      expect(charge.content).toEqual([
        { type: 'text', text: '{"chargeId":"ch_1","amount":5,"replayed":true}' },
      ]);
      expect(charge.structuredContent).toEqual({ chargeId: 'ch_1', amount: 5, replayed: true });
    });
  }
});

describe('finding 6: no identity fails clearly; MRTR rounds are not outcomes; a task id identifies the call', () => {
  it('options that can never work fail when the server is wrapped (ConfigurationError naming the option)', () => {
    const store = createMemoryStore();
    for (const [options, option] of [
      [{ store, conversationId: 'chat-1' }, 'conversationId'],
      [{ store, noSessionTurnId: 'shared' }, 'noSessionTurnId'],
      [{ store, sessionWindow: -5 }, 'sessionWindow'],
    ] as const) {
      let error: unknown;
      try {
        idempotentServer(new McpServer({ name: 'm', version: '1.0.0' }), options as never);
      } catch (e) {
        error = e;
      }
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({ option });
    }
  });

  it('sdk 2.x 2026-07-28: an input_required round is not stored: the retry with the answers runs the tool; a lost final reply replays; a new turn asks again', async () => {
    const { runs, http, connect } = await serve('sdk 2.x 2026-07-28');
    const client = await connect();
    const id = randomUUID();
    // Round 1 asks, the client answers (the user accepts) and retries: round 2 deploys.
    const deployed = await callTool(client, 'deploy', { env: 'prod' }, turn(id));
    expect(texts(deployed)).toEqual(['deployed to prod #1']);
    expect(runs).toMatchObject({ 'deploy:round': 2, deploy: 1 });

    // The same turn again, its final reply lost: the client retries; the outcome is replayed.
    http.dropNextResult();
    await expect(callTool(client, 'deploy', { env: 'prod' }, turn(id))).rejects.toThrow();
    const retried = await callTool(client, 'deploy', { env: 'prod' }, turn(id));
    expect(retried._meta?.[REPLAYED_META]).toBe(true);
    expect(runs).toMatchObject({ 'deploy:round': 2, deploy: 1 });

    // A new user turn: asked again, deployed again.
    await callTool(client, 'deploy', { env: 'prod' }, turn(randomUUID()));
    expect(runs).toMatchObject({ 'deploy:round': 4, deploy: 2 });
  });

  it('sdk 2.x 2026-07-28: the lost reply of the answered round is retried from round 1 and replayed', async () => {
    const { runs, http, connect } = await serve('sdk 2.x 2026-07-28');
    const client = await connect();
    const id = randomUUID();
    http.dropNextResult((body) => body.params?.inputResponses !== undefined);
    await expect(callTool(client, 'deploy', { env: 'prod' }, turn(id))).rejects.toThrow();
    expect(http.dropped()).toBe(1);
    expect(runs).toMatchObject({ 'deploy:round': 2, deploy: 1 });
    const retried = await callTool(client, 'deploy', { env: 'prod' }, turn(id));
    expect(retried._meta?.[REPLAYED_META]).toBe(true);
    expect(texts(retried)).toEqual(['deployed to prod #1\n\n{"replayed":true}']);
    expect(runs).toMatchObject({ 'deploy:round': 2, deploy: 1 });
  });

  for (const transport of STATELESS) {
    it(`${transport}: a request related to a task (_meta related-task id): the same task is one call, another task another`, async () => {
      const { runs, connect } = await serve(transport);
      const client = await connect();
      const task = (taskId: string) => ({ 'io.modelcontextprotocol/related-task': { taskId } });
      const first = randomUUID();
      await callTool(client, 'create_ticket', ticket, task(first));
      const retry = await callTool(client, 'create_ticket', ticket, task(first));
      const other = await callTool(client, 'create_ticket', ticket, task(randomUUID()));
      expect(retry._meta?.[REPLAYED_META]).toBe(true);
      expect(other._meta?.[REPLAYED_META]).toBeUndefined();
      expect(runs.create_ticket).toBe(2);
    });
  }

  for (const transport of ['sdk 1.x stateful', 'sdk 2.x 2026-07-28'] as const) {
    it(`${transport}: the same _meta turn id from two client apps (clientInfo names) is two calls`, async () => {
      const { runs, connect } = await serve(transport);
      const one = await connect('desk-app');
      const two = await connect('phone-app');
      await callTool(one, 'create_ticket', ticket, turn('1'));
      const twos = await callTool(two, 'create_ticket', ticket, turn('1'));
      expect(twos._meta?.[REPLAYED_META]).toBeUndefined();
      expect(runs.create_ticket).toBe(2);
    });
  }
});
