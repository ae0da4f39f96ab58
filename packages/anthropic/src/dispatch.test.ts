/**
 * createToolDispatcher in a hand-written loop: the real `@anthropic-ai/sdk` client
 * (`messages.create` and `messages.stream`) against the scripted Messages server.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/anthropic';
import { afterEach, describe, expect, test } from 'vitest';
import { ConfigurationError, createIdempotency, createToolDispatcher } from './index.js';
import {
  client,
  dispatchTurn,
  ticketArgs,
  ticketDefinition,
  ticketSystem,
} from './test-utils/app.js';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function setup(
  respond: (turn: ModelTurn) => ReturnType<Parameters<typeof startScriptedServer>[0]['respond']>,
) {
  const vendor = ticketSystem();
  const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
    create_ticket: { schema: ticketArgs, execute: vendor.create },
  });
  return {
    vendor,
    tools,
    start: async (maxRetries = 0) => {
      server = await startScriptedServer({ respond });
      return { anthropic: client(server.baseURL, maxRetries), server };
    },
  };
}

const ticket = (title: string) => ({ name: 'create_ticket', input: { title } });
const parsed = (content: unknown) => JSON.parse(content as string) as Record<string, unknown>;

for (const stream of [false, true]) {
  describe(`dispatcher, ${stream ? 'messages.stream' : 'messages.create'}`, () => {
    test('the model repeats a call in a later step: replayed, marked, one effect', async () => {
      const { vendor, tools, start } = setup((turn) =>
        turn.toolResults.length < 2 ? { toolUses: [ticket('Printer on fire')] } : { text: 'ok' },
      );
      const { anthropic } = await start();
      const { results } = await dispatchTurn(
        anthropic,
        tools,
        [{ role: 'user', content: 'Help' }],
        {
          conversationId: 'chat-1',
          stream,
        },
      );
      expect(vendor.tickets).toHaveLength(1);
      expect(results.map((r) => parsed(r.content))).toEqual([
        { ticket: 'T-1', title: 'Printer on fire', priority: 'normal' },
        { ticket: 'T-1', title: 'Printer on fire', priority: 'normal', replayed: true },
      ]);
      expect(results.every((r) => r.is_error === undefined)).toBe(true);
    });

    test('two identical calls in one step: one effect, the other replayed', async () => {
      const { vendor, tools, start } = setup((turn) =>
        turn.toolResults.length === 0
          ? { toolUses: [ticket('Twice'), ticket('Twice')] }
          : { text: 'ok' },
      );
      const { anthropic } = await start();
      const { results } = await dispatchTurn(anthropic, tools, [{ role: 'user', content: 'Go' }], {
        conversationId: 'chat-1',
        stream,
      });
      expect(vendor.tickets).toHaveLength(1);
      expect(results.map((r) => parsed(r.content).replayed).sort()).toEqual([true, undefined]);
    });

    test('a lost reply (dropped connection) retried by the client: one effect', async () => {
      const { vendor, tools, start } = setup((turn) =>
        turn.toolResults.length === 0 ? { toolUses: [ticket('Drop')] } : { text: 'ok' },
      );
      const { anthropic, server } = await start(2);
      server.inject(undefined, 'drop'); // the request after the tool ran
      const { results } = await dispatchTurn(anthropic, tools, [{ role: 'user', content: 'Go' }], {
        conversationId: 'chat-1',
        stream,
      });
      expect(server.requests.map((r) => r.fault)).toEqual([undefined, 'drop', undefined]);
      expect(vendor.tickets).toHaveLength(1);
      expect(results).toHaveLength(1);
    });

    test('a broken reply, the app runs the turn again: the call is replayed, one effect', async () => {
      const { vendor, tools, start } = setup((turn) =>
        turn.toolResults.length === 0 ? { toolUses: [ticket('Cut')] } : { text: 'ok' },
      );
      const { anthropic, server } = await start();
      server.inject(undefined, 'truncate');
      const history = [{ role: 'user' as const, content: 'Go' }];
      const turn = { conversationId: 'chat-1', stream };
      await expect(dispatchTurn(anthropic, tools, history, turn)).rejects.toThrow();
      const { results } = await dispatchTurn(anthropic, tools, history, turn);
      expect(server.requests[1]?.fault).toBe('truncate');
      expect(vendor.tickets).toHaveLength(1);
      expect(parsed(results[0]?.content)).toMatchObject({ ticket: 'T-1', replayed: true });
    });
  });
}

describe('dispatcher: what reaches the model and the developer', () => {
  test('bad input from the model: an is_error result saying what to fix, nothing run', async () => {
    const { vendor, tools, start } = setup((turn) =>
      turn.toolResults.length === 0
        ? {
            toolUses: [
              { name: 'create_ticket', input: '{"title": "unclosed' },
              { name: 'create_ticket', input: { title: '', priority: 'urgent' } },
              { name: 'delete_everything', input: {} },
            ],
          }
        : { text: 'ok' },
    );
    const { anthropic } = await start();
    const { results } = await dispatchTurn(anthropic, tools, [{ role: 'user', content: 'Go' }], {
      conversationId: 'chat-1',
    });
    expect(vendor.tickets).toHaveLength(0);
    expect(results.map((r) => r.is_error)).toEqual([true, true, true]);
    const [json, schema, unknown] = results.map((r) => parsed(r.content));
    expect(json).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect(json?.message).toMatch(/not valid JSON.*Nothing ran/);
    expect(schema?.message).toMatch(/title: .*priority: .*Nothing ran/s);
    expect(unknown?.message).toMatch(/no tool named "delete_everything".*create_ticket/);
  });

  test("the tool's own error: an is_error result, the claim released so a retry runs", async () => {
    let fail = true;
    const runs: string[] = [];
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      create_ticket: (args: { title: string }) => {
        runs.push(args.title);
        if (fail) throw new Error('helpdesk is down');
        return { ok: true };
      },
    });
    const reply = {
      content: [{ type: 'tool_use', id: 't1', name: 'create_ticket', input: { title: 'x' } }],
    };
    const turn = { messages: [{ role: 'user', content: 'Go' }], conversationId: 'c' };
    const first = await tools.run(reply, turn);
    expect(first.content[0]).toEqual({
      type: 'tool_result',
      tool_use_id: 't1',
      content: 'Error: helpdesk is down',
      is_error: true,
    });
    fail = false;
    const second = await tools.run({ content: [{ ...reply.content[0], id: 't2' }] as never }, turn);
    expect(second.content[0]?.content).toBe('{"ok":true}');
    expect(runs).toEqual(['x', 'x']);
  });

  test('no conversation identity: a ConfigurationError out of run, nothing ran', async () => {
    const vendor = ticketSystem();
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      create_ticket: { schema: ticketArgs, execute: vendor.create },
    });
    const reply = {
      content: [{ type: 'tool_use', id: 't1', name: 'create_ticket', input: { title: 'x' } }],
    };
    const error = await tools
      .run(reply, { messages: [{ role: 'user', content: 'Go' }] })
      .catch((e) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/conversationId/);
    expect(vendor.tickets).toHaveLength(0);
    // Tool results are not the user's words: a conversation of only tool results has no turn.
    const onlyResults = [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a' }] }];
    const refused = await tools
      .run(reply, { messages: onlyResults, conversationId: 'c' })
      .catch((e) => e);
    expect(ConfigurationError.isInstance(refused) && refused.option).toBe('turnId');
    expect(vendor.tickets).toHaveLength(0);
  });

  test('bad options throw a ConfigurationError when the dispatcher is made', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const make =
      (options: object, handlers: object = { create_ticket: () => 1 }) =>
      () =>
        createToolDispatcher(idempotency, handlers as never, options as never);
    expect(make({ conversationID: 'c' })).toThrow(/did you mean "conversationId"/);
    expect(make({ exclude: ['create_tickets'] })).toThrow(/no such tool/);
    expect(make({ policies: { create_ticket: { ttl: -1 } } })).toThrow(ConfigurationError);
    expect(make({}, { create_ticket: 42 })).toThrow(/must be a function/);
    expect(make({}, { 'create ticket': () => 1 })).toThrow(/not a tool name/);
  });

  test('a handler that is already idempotent (idempotency.wrap): refused when the dispatcher is made', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const vendor = ticketSystem();
    const wrapped = idempotency.wrap('create_ticket', vendor.create);
    const make = (handler: unknown) => () =>
      createToolDispatcher(idempotency, { create_ticket: handler as never });
    for (const handler of [wrapped, { schema: ticketArgs, execute: wrapped }]) {
      expect(make(handler)).toThrow(ConfigurationError);
      expect(make(handler)).toThrow(/"create_ticket" is already idempotent/);
    }
    expect(make(vendor.create)).not.toThrow();
    expect(vendor.tickets).toHaveLength(0);
  });

  test('system messages in messages (a reminder before each user message) are no answer', async () => {
    const { vendor, tools, start } = setup((turn) =>
      turn.toolResults.length === 0 ? { toolUses: [ticket(turn.userText)] } : { text: 'ok' },
    );
    const { anthropic, server } = await start();
    const reminder = (time: string) => ({ role: 'system' as const, content: `It is ${time}.` });
    const turn = { conversationId: 'chat-1' };
    // The reply is cut after the tool ran; the app keeps the unanswered attempt in its history
    // and sends the user's message again after a new reminder: the same turn.
    server.inject(undefined, 'truncate');
    const first = [reminder('09:00'), { role: 'user' as const, content: 'Open one' }];
    await expect(dispatchTurn(anthropic, tools, first, turn)).rejects.toThrow();
    const again = [...first, reminder('09:07'), { role: 'user' as const, content: 'Open one' }];
    const { results, messages } = await dispatchTurn(anthropic, tools, again, turn);
    expect(vendor.tickets).toHaveLength(1);
    expect(parsed(results[0]?.content)).toMatchObject({ ticket: 'T-1', replayed: true });
    // After the answer, the same words after a reminder are a new turn.
    const next = [...messages, reminder('09:08'), { role: 'user' as const, content: 'Open one' }];
    await dispatchTurn(anthropic, tools, next, turn);
    expect(vendor.tickets).toHaveLength(2);
  });

  test('describe appends the retry notes; excluded tools are left as they are', () => {
    const tools = createToolDispatcher(
      createIdempotency({ store: createMemoryStore() }),
      { create_ticket: () => 1, send_sms: () => 1, lookup: () => 1 },
      { unsafe: ['send_sms'], exclude: ['lookup'] },
    );
    const [ticket, sms, lookup] = tools.describe([
      ticketDefinition,
      { ...ticketDefinition, name: 'send_sms' },
      { ...ticketDefinition, name: 'lookup' },
    ]);
    expect(ticket?.description).toMatch(/^Open a support ticket\.\n\nSafe to retry/);
    expect(sms?.description).toMatch(/not safe to retry/i);
    expect(lookup?.description).toBe('Open a support ticket.');
  });
});
