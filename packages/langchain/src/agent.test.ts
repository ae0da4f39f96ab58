import { randomUUID } from 'node:crypto';
import { createMemoryStore, RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '@idempotent-tools/core';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';
import { tool } from '@langchain/core/tools';
import { MemorySaver } from '@langchain/langgraph';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { deriveTurnId } from './identity.js';
import {
  agentWith,
  human,
  MODES,
  seenByModel,
  ticketTool,
  toolResults,
} from './test-utils/fixtures.js';

const done = () => new AIMessage('Done.');
const ticket = (title: string) => ({ name: 'create_ticket', args: { title } });
const thread = () => ({ configurable: { thread_id: `thread-${randomUUID()}` } });

describe.each(MODES)('createAgent, %s', (mode) => {
  test('(1) the same call again in a later step runs once; the model reads replayed: true', async () => {
    const effects: string[] = [];
    const model = fakeModel()
      .respondWithTools([ticket('Login fails')])
      .respondWithTools([ticket('Login fails')])
      .respond(done());
    const agent = agentWith({
      mode,
      model,
      tools: [ticketTool(effects)],
      options: { store: createMemoryStore() },
    });

    const out = await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, thread());

    expect(effects).toEqual(['Login fails']);
    const [first, second] = toolResults(out.messages);
    expect(first?.content).toEqual({ ticketId: 'T-1', title: 'Login fails' });
    expect(second?.content).toEqual({ ticketId: 'T-1', title: 'Login fails', replayed: true });
    expect(first?.metadata?.idempotency).toMatchObject({ replayed: false, outcome: 'executed' });
    expect(second?.metadata?.idempotency).toMatchObject({ replayed: true, outcome: 'replayed' });
    // What the model was shown on its third call:
    expect(seenByModel(model, 2).map((r) => r.content)).toEqual([
      { ticketId: 'T-1', title: 'Login fails' },
      { ticketId: 'T-1', title: 'Login fails', replayed: true },
    ]);
  });

  test('(2) two identical calls in one step run once', async () => {
    const effects: string[] = [];
    const model = fakeModel()
      .respondWithTools([ticket('Login fails'), ticket('Login fails')])
      .respond(done());
    const agent = agentWith({
      mode,
      model,
      tools: [ticketTool(effects, 20)],
      options: { store: createMemoryStore() },
    });

    const out = await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, thread());

    expect(effects).toHaveLength(1);
    const results = toolResults(out.messages);
    expect(results).toHaveLength(2);
    expect(results.map((r) => (r.content as { ticketId: string }).ticketId)).toEqual([
      'T-1',
      'T-1',
    ]);
    const replayed = results.map((r) => (r.content as { replayed?: boolean }).replayed === true);
    expect(replayed.sort()).toEqual([false, true]);
  });

  test('(3) a new turn with the same arguments runs again; a re-run of the same turn does not', async () => {
    const effects: string[] = [];
    const model = fakeModel()
      .respondWithTools([ticket('Login fails')])
      .respond(done())
      .respondWithTools([ticket('Login fails')])
      .respond(done())
      .respondWithTools([ticket('Login fails')])
      .respond(done());
    const store = createMemoryStore();
    const tools = [ticketTool(effects)];
    const agent = agentWith({
      mode,
      model,
      tools,
      options: { store },
      checkpointer: new MemorySaver(),
    });
    const config = thread();

    await agent.invoke({ messages: [human('Open a ticket', 'm1')] }, config);
    const out = await agent.invoke({ messages: [human('Open one more', 'm2')] }, config);
    expect(effects).toHaveLength(2);
    expect(toolResults(out.messages).map((r) => r.content)).toEqual([
      { ticketId: 'T-1', title: 'Login fails' },
      { ticketId: 'T-2', title: 'Login fails' },
    ]);

    // The second turn re-run from scratch (a server retrying the request: same thread, the
    // conversation so far, no checkpoint, messages without ids) is the same turn: replayed.
    const rerun = agentWith({ mode, model, tools, options: { store } });
    const again = await rerun.invoke(
      { messages: [new HumanMessage('Open a ticket'), done(), new HumanMessage('Open one more')] },
      config,
    );
    expect(effects).toHaveLength(2);
    expect(toolResults(again.messages)[0]?.content).toEqual({
      ticketId: 'T-2',
      title: 'Login fails',
      replayed: true,
    });
  });

  test('(4a) drift reaches the model as a tool error with guidance', async () => {
    const customers: string[] = [];
    const createCustomer = tool(
      async ({ email, name }) => {
        customers.push(email);
        return { customerId: `C-${customers.length}`, email, name };
      },
      {
        name: 'create_customer',
        description: 'Create a customer.',
        schema: z.object({ email: z.string(), name: z.string() }),
      },
    );
    const call = (name: string) => ({ name: 'create_customer', args: { email: 'a@x.io', name } });
    const model = fakeModel()
      .respondWithTools([call('Ann')])
      .respondWithTools([call('Anne')])
      .respond(done());
    const agent = agentWith({
      mode,
      model,
      tools: [createCustomer],
      options: {
        store: createMemoryStore(),
        policies: { create_customer: { businessKey: (args) => args.email } },
      },
    });

    const out = await agent.invoke({ messages: [human('Add Ann', 'm1')] }, thread());

    expect(customers).toEqual(['a@x.io']);
    const [, drift] = toolResults(out.messages);
    expect(drift?.status).toBe('error');
    expect(drift?.content).toMatchObject({
      error: 'drift',
      next: 'change-arguments',
      message: expect.stringMatching(/other arguments/),
    });
    expect(drift?.metadata?.idempotency).toMatchObject({ outcome: 'error', error: 'drift' });
    expect(seenByModel(model, 2)[1]?.content).toMatchObject({ error: 'drift' });
  });

  test('(4b) an attempt that died mid-way surfaces as outcome_unknown; nothing runs', async () => {
    const effects: string[] = [];
    let now = Date.now(); // the store's clock, moved by the test
    const store = createMemoryStore({ now: () => now });
    const config = thread();
    const message = human('Open a ticket', 'm1');
    // A crashed attempt of this very call: its claim was taken and its lease ran out.
    const { createIdempotency } = await import('@idempotent-tools/core');
    const turnId = deriveTurnId({ messages: [message], threadId: config.configurable.thread_id });
    const args = { title: 'Login fails' };
    const { key, fingerprint } = createIdempotency({ store }).keyOf({
      toolName: 'create_ticket',
      turnId,
      args,
    });
    await store.claim({ key, fingerprint, token: 'dead', leaseMs: 30_000, ttlMs: 600_000 });
    now += 60_000; // its lease ran out

    const model = fakeModel()
      .respondWithTools([ticket('Login fails')])
      .respond(done());
    const agent = agentWith({ mode, model, tools: [ticketTool(effects)], options: { store } });
    const out = await agent.invoke({ messages: [message] }, config);

    expect(effects).toEqual([]);
    const [unknown] = toolResults(out.messages);
    expect(unknown?.status).toBe('error');
    expect(unknown?.content).toMatchObject({
      error: 'outcome_unknown',
      next: 'check-first',
      message: expect.stringMatching(/Check whether it took effect/),
    });
    expect(seenByModel(model, 1)[0]?.content).toMatchObject({ error: 'outcome_unknown' });
  });

  test("the tool's own error: as langchain handles it, and the key is freed for a retry", async () => {
    let attempts = 0;
    const effects: string[] = [];
    const flaky = tool(
      async ({ title }) => {
        if (++attempts === 1) throw new Error('503 from the ticket service');
        effects.push(title);
        return { ticketId: 'T-1' };
      },
      {
        name: 'create_ticket',
        description: 'Open a ticket.',
        schema: z.object({ title: z.string() }),
      },
    );
    const model = fakeModel()
      .respondWithTools([ticket('Login fails')])
      .respondWithTools([ticket('Login fails')])
      .respond(done());
    const agent = agentWith({
      mode,
      model,
      tools: [flaky],
      options: { store: createMemoryStore() },
    });
    const config = thread();
    const input = { messages: [human('Open a ticket', 'm1')] };
    if (mode === 'middleware') {
      // With a wrapToolCall middleware, langchain lets a tool's error end the run (add
      // toolRetryMiddleware to turn it into a tool message); the same turn, run again, may run.
      await expect(agent.invoke(input, config)).rejects.toThrow('503');
      const again = agentWith({
        mode,
        model: fakeModel()
          .respondWithTools([ticket('Login fails')])
          .respond(done()),
        tools: [flaky],
        options: { store: createMemoryStore() },
      });
      await again.invoke(input, config);
    } else {
      // Without middleware the tool node turns it into an error message the model reads.
      const out = await agent.invoke(input, config);
      expect(toolResults(out.messages)[0]?.content).toMatch(/503 from the ticket service/);
      expect(toolResults(out.messages)[0]?.status).toBe('error');
    }
    expect(attempts).toBe(2);
    expect(effects).toEqual(['Login fails']);
  });

  test('descriptions: the retry note, the unsafe note, read-only tools untouched', async () => {
    const effects: string[] = [];
    const lookup = tool(async () => 'sunny', {
      name: 'get_weather',
      description: 'Weather now.',
      schema: z.object({ city: z.string() }),
    });
    const page = tool(async () => 'paged', {
      name: 'page_oncall',
      description: 'Page the on-call engineer.',
      schema: z.object({ reason: z.string() }),
    });
    const model = fakeModel().respond(done());
    const bound: { name: string; description: string }[][] = [];
    const bindTools = model.bindTools.bind(model);
    model.bindTools = (tools) => {
      bound.push(tools as { name: string; description: string }[]);
      return bindTools(tools);
    };
    const agent = agentWith({
      mode,
      model,
      tools: [ticketTool(effects), lookup, page],
      options: { store: createMemoryStore(), exclude: ['get_weather'], unsafe: ['page_oncall'] },
    });
    await agent.invoke({ messages: [human('Hi', 'm1')] }, thread());

    const descriptions = Object.fromEntries(bound[0]?.map((t) => [t.name, t.description]) ?? []);
    expect(descriptions).toEqual({
      create_ticket: `Open a support ticket.\n\n${RETRY_SAFE_NOTE}`,
      get_weather: 'Weather now.',
      page_oncall: `Page the on-call engineer.\n\n${RETRY_UNSAFE_NOTE}`,
    });
  });
});
