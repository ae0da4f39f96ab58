/**
 * What real users of third-party MCP clients get: `@ai-sdk/mcp` (createMCPClient, with
 * `generateText` over `@ai-sdk/openai`) and `@langchain/mcp-adapters` (MultiServerMCPClient, in
 * a LangGraph ReAct agent over `@langchain/openai`), both against the repo's scripted model
 * server. Neither client can send a `_meta` turn id. What they get is the contract, never a turn
 * shared across clients:
 * - a stateful server (a session per client): each client (session) its own effect; a repeat in
 *   the session within `sessionWindow` replayed; a deliberate repeat after it run again;
 * - a stateless server: every call refused (the model reads why; nothing ran);
 * - a turn id in an HTTP header the app sets per user turn, read by the server's `turnId`
 *   option: the contract on any transport.
 */
import { randomUUID } from 'node:crypto';
import { createMCPClient } from '@ai-sdk/mcp';
import { createOpenAI } from '@ai-sdk/openai';
import { startScriptedServer } from '@idempotent-tools/testing/openai';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { MultiServerMCPClient } from '@langchain/mcp-adapters';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, isStepCount } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createIdempotency,
  createMemoryStore,
  type IdempotentServerOptions,
  REPLAYED_META,
} from './index.js';
import { createHelpdesk, type Runs } from './test-utils/helpdesk.js';
import { startHttpServer } from './test-utils/http.js';
import { createModernHelpdesk, startModernServer } from './test-utils/modern.js';

type Transport = 'sdk 1.x stateful' | 'sdk 1.x stateless' | 'sdk 2.x';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const HOUR = 60 * 60 * 1000;
/** The header the apps of these tests put their user turn id in. */
const TURN_HEADER = 'x-turn-id';

/** The helpdesk over `transport`, on a memory store whose clock the test moves. */
async function serve(transport: Transport, options: Partial<IdempotentServerOptions> = {}) {
  const clock = { now: Date.parse('2026-09-01T09:00:00Z') };
  const idempotency = createIdempotency({ store: createMemoryStore({ now: () => clock.now }) });
  const runs: Runs = {};
  const serverOptions = { idempotency, ...options } as IdempotentServerOptions;
  const createServer = () =>
    transport === 'sdk 2.x'
      ? createModernHelpdesk(runs, serverOptions)
      : createHelpdesk(runs, serverOptions);
  const http =
    transport === 'sdk 2.x'
      ? await startModernServer({ createServer, json: true })
      : await startHttpServer({
          createServer,
          json: true,
          stateless: transport === 'sdk 1.x stateless',
        });
  cleanups.push(http.close);
  return { runs, http, clock };
}

/**
 * The scripted model: for each user message "Open a ticket: <title>", it calls create_ticket
 * (`calls` times in the turn: 2 = the model repeating its call), then answers with what the
 * tool said.
 */
async function scriptedModel(calls = 1) {
  const model = await startScriptedServer({
    respond: (turn) => {
      const title = turn.userText.replace(/^Open a ticket: /, '');
      return turn.toolOutputs.length < calls
        ? { toolCalls: [{ name: 'create_ticket', arguments: { title } }] }
        : { content: `Done: ${turn.toolOutputs.join(' | ')}` };
    },
  });
  cleanups.push(() => model.close());
  return model;
}

describe('@ai-sdk/mcp createMCPClient in generateText', () => {
  /** One user turn of an app: a client per request (as the AI SDK docs do), the model, the tools. */
  async function say(url: URL, baseURL: string, text: string, headers?: Record<string, string>) {
    const mcp = await createMCPClient({
      transport: { type: 'http', url: url.href, ...(headers ? { headers } : {}) },
    });
    try {
      const openai = createOpenAI({ baseURL, apiKey: 'test' });
      const result = await generateText({
        model: openai.chat('gpt-4o'),
        tools: await mcp.tools(),
        prompt: text,
        stopWhen: isStepCount(4),
      });
      return result.steps.flatMap((step) =>
        step.toolResults.map((r) => r.output as Record<string, unknown>),
      );
    } finally {
      await mcp.close();
    }
  }

  it('sdk 1.x stateful: two users with the same prompt get two tickets; the model repeating its call in the turn gets the replay', async () => {
    const { runs, http } = await serve('sdk 1.x stateful');
    const model = await scriptedModel(2);
    const alice = await say(http.url, model.baseURL, 'Open a ticket: Printer on fire');
    const bob = await say(http.url, model.baseURL, 'Open a ticket: Printer on fire');
    expect(runs.create_ticket).toBe(2);
    expect(
      alice.map((output) => (output._meta as Record<string, unknown> | undefined)?.[REPLAYED_META]),
    ).toEqual([undefined, true]);
    expect(JSON.stringify(bob[0])).toContain('T-2');
  });

  for (const transport of ['sdk 1.x stateless', 'sdk 2.x'] as const) {
    it(`${transport}: no turn id: the call is refused, the model reads what the client must send, nothing runs`, async () => {
      const { runs, http } = await serve(transport);
      const model = await scriptedModel();
      const [output] = await say(http.url, model.baseURL, 'Open a ticket: Printer on fire');
      expect(output?.isError).toBe(true);
      expect(JSON.stringify(output)).toContain('io.idempotent-tools/turn-id');
      expect(runs.create_ticket).toBeUndefined();
      const seen = model.requests.at(-1)?.body as {
        messages: Array<{ role: string; content: string }>;
      };
      expect(seen.messages.find((m) => m.role === 'tool')?.content).toContain('configuration');
    });

    it(`${transport}: the app's turn id in a header (server option turnId): two users two tickets, the app re-sending a turn one`, async () => {
      const { runs, http } = await serve(transport, { turnId: (call) => call.header(TURN_HEADER) });
      const model = await scriptedModel();
      const aliceTurn = { [TURN_HEADER]: randomUUID() };
      await say(http.url, model.baseURL, 'Open a ticket: Printer on fire', aliceTurn);
      await say(http.url, model.baseURL, 'Open a ticket: Printer on fire', {
        [TURN_HEADER]: randomUUID(),
      });
      const resent = await say(
        http.url,
        model.baseURL,
        'Open a ticket: Printer on fire',
        aliceTurn,
      );
      expect(runs.create_ticket).toBe(2);
      expect((resent[0]?._meta as Record<string, unknown> | undefined)?.[REPLAYED_META]).toBe(true);
    });
  }
});

describe('@langchain/mcp-adapters MultiServerMCPClient in a LangGraph agent', () => {
  /** The content block of a tool message (LangChain puts a single block in as its JSON). */
  const block = (message: { content: unknown } | undefined) =>
    JSON.parse(String(message?.content)) as { text: string; [field: string]: unknown };

  async function agentFor(url: URL, baseURL: string) {
    const mcp = new MultiServerMCPClient({
      mcpServers: { helpdesk: { transport: 'http', url: url.href } },
      // The app's recipe for a turn id: its own id of the user turn, from the run's config.
      beforeToolCall: (_call, _state, config) => {
        const turnId = (config.configurable as { turn_id?: string } | undefined)?.turn_id;
        return turnId === undefined ? {} : { headers: { [TURN_HEADER]: turnId } };
      },
    });
    cleanups.push(() => mcp.close());
    const llm = new ChatOpenAI({
      model: 'gpt-4o',
      apiKey: 'test',
      configuration: { baseURL },
      maxRetries: 0,
    });
    const agent = createReactAgent({ llm, tools: await mcp.getTools() });
    return async (text: string, configurable: Record<string, string> = {}) => {
      const state = await agent.invoke(
        { messages: [{ role: 'user', content: text }] },
        { configurable },
      );
      return state.messages.filter((m) => m.getType() === 'tool');
    };
  }

  it('sdk 1.x stateful: a replay is one text block that says replayed and keeps structuredContent (finding 5); two clients, two tickets', async () => {
    const { runs, http } = await serve('sdk 1.x stateful');
    const model = await scriptedModel(2);
    const say = await agentFor(http.url, model.baseURL);
    const [fresh, replay] = await say('Open a ticket: Printer on fire');
    expect(runs.create_ticket).toBe(1);
    // LangChain's adapter turns a result of one text block into that block, structuredContent on it.
    expect(block(fresh)).toEqual({
      type: 'text',
      text: 'Created ticket T-1: Printer on fire',
      structuredContent: expect.objectContaining({ ticketId: 'T-1' }),
    });
    expect(block(replay)).toEqual({
      type: 'text',
      text: 'Created ticket T-1: Printer on fire\n\n{"replayed":true}',
      structuredContent: expect.objectContaining({ ticketId: 'T-1', replayed: true }),
      meta: { [REPLAYED_META]: true },
    });
    // The model read the mark.
    const seen = model.requests.at(-1)?.body as {
      messages: Array<{ role: string; content: unknown }>;
    };
    expect(JSON.stringify(seen.messages.filter((m) => m.role === 'tool').at(-1))).toContain(
      'replayed',
    );

    const other = await agentFor(http.url, model.baseURL);
    await other('Open a ticket: Printer on fire');
    expect(runs.create_ticket).toBe(2);
  });

  it('sdk 1.x stateful: a deliberate repeat after sessionWindow runs again', async () => {
    const { runs, http, clock } = await serve('sdk 1.x stateful');
    const model = await scriptedModel();
    const say = await agentFor(http.url, model.baseURL);
    await say('Open a ticket: Printer on fire');
    clock.now += 3 * HOUR;
    const [later] = await say('Open a ticket: Printer on fire');
    expect(runs.create_ticket).toBe(2);
    expect(JSON.stringify(later?.content)).not.toContain('replayed');
  });

  for (const transport of ['sdk 1.x stateless', 'sdk 2.x'] as const) {
    it(`${transport}: no turn id: the agent's tool message is the refusal; nothing runs`, async () => {
      const { runs, http } = await serve(transport);
      const model = await scriptedModel();
      const say = await agentFor(http.url, model.baseURL);
      const [refused] = await say('Open a ticket: Printer on fire');
      expect(JSON.stringify(refused?.content)).toContain('io.idempotent-tools/turn-id');
      expect(runs.create_ticket).toBeUndefined();
    });

    it(`${transport}: the turn id in a header (beforeToolCall from the run's config, server option turnId): two users two tickets, a re-sent turn one`, async () => {
      const { runs, http } = await serve(transport, { turnId: (call) => call.header(TURN_HEADER) });
      const model = await scriptedModel();
      const say = await agentFor(http.url, model.baseURL);
      const alice = { turn_id: randomUUID() };
      await say('Open a ticket: Printer on fire', alice);
      await say('Open a ticket: Printer on fire', { turn_id: randomUUID() });
      const [resent] = await say('Open a ticket: Printer on fire', alice);
      expect(runs.create_ticket).toBe(2);
      expect(block(resent).text).toBe('Created ticket T-1: Printer on fire\n\n{"replayed":true}');
    });
  }
});
