/**
 * The adapter through the real `@google/genai` client against the scripted Gemini server: the
 * SDK's automatic function calling (JSON and streamed), hand-written loops and chats. Side
 * effects are counted by the ticket system, asserted exactly.
 */
import type { CallableTool, Content } from '@google/genai';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  type ModelTurn,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/gemini';
import { afterEach, describe, expect, test } from 'vitest';
import {
  ConfigurationError,
  createIdempotency,
  type IdempotentFunctions,
  idempotentCallableTool,
  idempotentFunctions,
} from './index.js';
import {
  client,
  MODEL,
  runTurn,
  type Surface,
  ticketArgs,
  ticketCallable,
  ticketDeclaration,
  ticketModel,
  ticketSystem,
  user,
} from './test-utils/app.js';
import { ticketFunctions } from './test-utils/drivers.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function setup(respond: (turn: ModelTurn) => ScriptedReply = ticketModel) {
  const server = await startScriptedServer({ respond });
  servers.push(server);
  const system = ticketSystem();
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const fns = await ticketFunctions(idempotency, system, 'functions');
  return { server, system, idempotency, fns, ai: client(server.baseUrl) };
}

/** The function responses the app sent the model, over all requests. */
const sentResponses = (server: ScriptedServer) => {
  const seen = new Map<string, Record<string, unknown>>();
  for (const r of server.requests) {
    for (const c of (r.body as { contents?: Content[] } | undefined)?.contents ?? []) {
      for (const p of c.parts ?? []) {
        const f = p.functionResponse;
        if (f !== undefined) seen.set(f.id ?? JSON.stringify(f), f.response ?? {});
      }
    }
  }
  return [...seen.values()];
};

/** The function calls the model sent, over all replies (their ids). */
const turnFor = (text: string, conversationId = 'chat-1') => ({
  history: [],
  text,
  system: 'You open tickets.',
  conversationId,
});

const allSurfaces: Surface[] = ['afc', 'afc-stream', 'manual', 'manual-stream', 'chat', 'chat-afc'];

describe('the model repeats a call in a later step of the turn', () => {
  for (const surface of allSurfaces) {
    test(`${surface}: replayed, marked, the side effect ran once`, async () => {
      // Step 1 opens the ticket; step 2 (after one response) asks for the same ticket again.
      const { server, system, fns, ai } = await setup((turn) =>
        turn.functionResponses.length < 2
          ? { functionCalls: [{ name: 'create_ticket', args: { title: turn.userText } }] }
          : { text: 'Done.' },
      );
      await runTurn(ai, fns, surface, turnFor('Printer on fire'));
      expect(system.tickets).toHaveLength(1);
      const [first, second] = sentResponses(server);
      expect(first).toEqual({ ticket: 'T-1', title: 'Printer on fire', priority: 'normal' });
      expect(second).toEqual({ ...first, replayed: true });
    });
  }
});

describe('two identical calls in one step', () => {
  for (const surface of allSurfaces) {
    test(`${surface}: one side effect; both answered, one marked replayed`, async () => {
      const { server, system, fns, ai } = await setup((turn) =>
        turn.functionResponses.length === 0
          ? {
              functionCalls: [
                { name: 'create_ticket', args: { title: 'Printer' } },
                { name: 'create_ticket', args: { title: 'Printer' } },
              ],
            }
          : { text: 'Done.' },
      );
      await runTurn(ai, fns, surface, turnFor('Open two?'));
      expect(system.tickets).toHaveLength(1);
      const responses = sentResponses(server);
      expect(responses).toHaveLength(2);
      expect(responses.filter((r) => r.replayed === true)).toHaveLength(1);
      expect(responses.map((r) => r.ticket)).toEqual(['T-1', 'T-1']);
    });
  }
});

describe('the app retries after a lost reply or a broken stream', () => {
  const cases: Array<[Surface, 'truncate' | 'drop']> = [
    ['afc', 'truncate'],
    ['afc', 'drop'],
    ['afc-stream', 'truncate'],
    ['manual', 'truncate'],
    ['manual-stream', 'truncate'],
    ['chat', 'drop'],
    ['chat-afc', 'truncate'],
  ];
  for (const [surface, fault] of cases) {
    test(`${surface}, ${fault} after the tool ran: the retry replays, one side effect`, async () => {
      const { server, system, fns, ai } = await setup();
      // Request 0 asks for the call; request 1 carries the function response: its reply is lost.
      server.inject(undefined, fault);
      const turn = turnFor('Printer on fire');
      await expect(runTurn(ai, fns, surface, turn)).rejects.toThrow();
      expect(system.tickets).toHaveLength(1);
      await runTurn(ai, fns, surface, turn); // the app sends the same turn again
      expect(system.tickets).toHaveLength(1);
      expect(server.requests[1]?.fault).toBe(fault);
      const responses = sentResponses(server);
      expect(responses.at(-1)).toMatchObject({ ticket: 'T-1', replayed: true });
    });
  }

  test("the SDK's own retry (httpOptions.retryOptions) after a 503: one side effect, no error", async () => {
    const { server, system, fns } = await setup();
    const ai = client(server.baseUrl, { retryOptions: { attempts: 3, initialDelay: 0.01 } });
    server.inject(undefined, { status: 503 });
    const history = await runTurn(ai, fns, 'afc', turnFor('Printer on fire'));
    expect(history.at(-1)?.parts?.[0]?.text).toContain('T-1');
    expect(server.requests).toHaveLength(3);
    expect(system.tickets).toHaveLength(1);
  });

  test('without retryOptions the SDK does not retry: the 503 reaches the app', async () => {
    const { server, fns, ai } = await setup();
    server.inject({ status: 503 });
    await expect(runTurn(ai, fns, 'afc', turnFor('x'))).rejects.toMatchObject({ status: 503 });
    expect(server.requests).toHaveLength(1);
  });
});

describe('turns and conversations', () => {
  test('a new turn with the same text runs again; a second conversation too', async () => {
    const { system, fns, ai } = await setup();
    const history = await runTurn(ai, fns, 'afc', turnFor('Yes, send it.'));
    await runTurn(ai, fns, 'afc', { ...turnFor('Yes, send it.'), history });
    expect(system.tickets).toHaveLength(2);
    await runTurn(ai, fns, 'afc', turnFor('Yes, send it.', 'chat-2'));
    expect(system.tickets).toHaveLength(3);
  });

  test('an explicit turnId wins; the same turnId in another conversation replays', async () => {
    const { system, fns, ai } = await setup();
    for (const conversationId of ['a', 'b']) {
      const tools = [fns.callable({ turnId: 'msg-1', conversationId })];
      await ai.models.generateContent({ model: MODEL, contents: 'Hi', config: { tools } });
    }
    expect(system.tickets).toHaveLength(1);
  });

  test('the options conversationId as a function of the call, with the contents', async () => {
    const server = await startScriptedServer({ respond: ticketModel });
    servers.push(server);
    const system = ticketSystem();
    const fns = idempotentFunctions(
      { create_ticket: { declaration: ticketDeclaration, execute: system.create } },
      { store: createMemoryStore(), conversationId: ({ request }) => request.scope },
    );
    const ai = client(server.baseUrl);
    for (const scope of ['u1', 'u2']) {
      const tools = [fns.callable({ contents: 'Hi', scope })];
      await ai.models.generateContent({ model: MODEL, contents: 'Hi', config: { tools } });
    }
    expect(system.tickets).toHaveLength(2);
  });

  test('a businessKey tool needs no turn: the same key replays across conversations', async () => {
    const { server } = await setup();
    const system = ticketSystem();
    const fns = idempotentFunctions(
      { create_ticket: { declaration: ticketDeclaration, execute: system.create } },
      {
        store: createMemoryStore(),
        policies: { create_ticket: { businessKey: (args: { title: string }) => args.title } },
      },
    );
    const ai = client(server.baseUrl);
    await ai.models.generateContent({
      model: MODEL,
      contents: 'A',
      config: { tools: [fns.callable()] },
    });
    await ai.models.generateContent({
      model: MODEL,
      contents: 'A',
      config: { tools: [fns.callable()] },
    });
    expect(system.tickets).toHaveLength(1);
  });
});

describe('bad input from the model: a clear error response, nothing ran', () => {
  for (const surface of ['afc', 'manual', 'chat'] as const) {
    test(`${surface}: arguments that do not match the schema, and an unknown function`, async () => {
      const { server, system, fns, ai } = await setup((turn) =>
        turn.functionResponses.length === 0
          ? {
              functionCalls: [
                { name: 'create_ticket', args: { title: '' } },
                { name: 'delete_everything', args: {} },
              ],
            }
          : { text: 'Sorry.' },
      );
      await runTurn(ai, fns, surface, turnFor('Hi'));
      expect(system.tickets).toHaveLength(0);
      const [invalid, unknown, ...more] = sentResponses(server);
      expect(invalid).toMatchObject({ error: { error: 'invalid_input', next: 'fix-input' } });
      expect(JSON.stringify(invalid)).toContain('title');
      if (surface === 'afc') {
        // A callable tool answers its own functions only: another callable tool may own the rest.
        expect(unknown).toBeUndefined();
      } else {
        expect(unknown).toMatchObject({ error: { error: 'invalid_input' } });
        expect(JSON.stringify(unknown)).toContain('no tool named \\"delete_everything\\"');
      }
      expect(more).toEqual([]);
    });
  }
});

test('automatic function calling with two callable tools: each call answered once, by its owner', async () => {
  const { server, system, fns, ai } = await setup((turn) =>
    turn.functionResponses.length === 0
      ? {
          functionCalls: [
            { name: 'create_ticket', args: { title: 'P' } },
            { name: 'get_weather', args: { city: 'Oslo' } },
          ],
        }
      : { text: 'Done.' },
  );
  const weather: CallableTool = {
    tool: async () => ({ functionDeclarations: [{ name: 'get_weather' }] }),
    callTool: async (calls) =>
      calls
        .filter((c) => c.name === 'get_weather')
        .map(() => ({ functionResponse: { name: 'get_weather', response: { sky: 'grey' } } })),
  };
  const contents = 'Ticket and weather';
  const tools = [fns.callable({ contents, conversationId: 'c' }), weather];
  await ai.models.generateContent({ model: MODEL, contents, config: { tools } });
  expect(system.tickets).toHaveLength(1);
  expect(sentResponses(server)).toEqual([
    { ticket: 'T-1', title: 'P', priority: 'normal' },
    { sky: 'grey' },
  ]);
});

describe('what the model reads', () => {
  test('declarations carry the retry notes; unsafe the opposite; exclude untouched', () => {
    const execute = () => ({ ok: true });
    const fns = idempotentFunctions(
      {
        a: { declaration: { description: 'A.' }, execute },
        b: { declaration: { description: 'B.' }, execute },
        c: { declaration: { description: 'C.' }, execute },
      },
      { store: createMemoryStore(), conversationId: 'x', unsafe: ['b'], exclude: ['c'] },
    );
    const [a, b, c] = fns.tool.functionDeclarations ?? [];
    expect(a?.description).toMatch(/^A\.\n\nSafe to retry/);
    expect(b?.description).toMatch(/^B\.\n\n.*not safe to retry/i);
    expect(c).toEqual({ description: 'C.', name: 'c' });
  });

  test('markFresh: fresh responses carry replayed: false; a non-object result is { output }', async () => {
    const fns = idempotentFunctions(
      { n: { execute: () => 42 } },
      { store: createMemoryStore(), conversationId: 'x', markFresh: true },
    );
    const call = { name: 'n', args: {}, id: 'c1' };
    const turn = { contents: 'Hi' };
    expect(await fns.run([call], turn)).toEqual([
      { functionResponse: { id: 'c1', name: 'n', response: { output: 42, replayed: false } } },
    ]);
    expect(await fns.run([{ ...call, id: 'c2' }], turn)).toEqual([
      { functionResponse: { id: 'c2', name: 'n', response: { output: 42, replayed: true } } },
    ]);
  });

  test("a wrapped CallableTool's response is stored; a replay answers it under the new call id", async () => {
    const system = ticketSystem();
    const fns = await idempotentCallableTool(ticketCallable(system), {
      store: createMemoryStore(),
      conversationId: 'x',
    });
    expect(
      (await fns.callable({ contents: 'Hi' }).tool()).functionDeclarations?.[0]?.description,
    ).toContain('Safe to retry');
    const call = { name: 'create_ticket', args: { title: 'P' } };
    const tool = fns.callable({ contents: 'Hi' });
    await tool.callTool([{ ...call, id: 'c1' }]);
    const [replay] = await tool.callTool([{ ...call, id: 'c2' }]);
    expect(replay).toEqual({
      functionResponse: {
        id: 'c2',
        name: 'create_ticket',
        response: { ticket: 'T-1', title: 'P', priority: 'normal', replayed: true },
      },
    });
    expect(system.tickets).toHaveLength(1);
  });
});

describe("the tool's own errors", () => {
  const failing = (failures: { left: number }, system: ReturnType<typeof ticketSystem>) => ({
    create_ticket: {
      declaration: ticketDeclaration,
      schema: ticketArgs,
      execute: (args: { title: string }) => {
        if (failures.left-- > 0) throw new Error('ticket system down');
        return system.create(args);
      },
    },
  });

  test('rethrown out of run / generateContent by default; the claim is released, a retry runs', async () => {
    const { server } = await setup();
    const system = ticketSystem();
    const fns = idempotentFunctions(failing({ left: 1 }, system), {
      store: createMemoryStore(),
      conversationId: 'x',
    });
    const ai = client(server.baseUrl);
    const params = {
      model: MODEL,
      contents: 'Hi',
      config: { tools: [fns.callable({ contents: 'Hi' })] },
    };
    await expect(ai.models.generateContent(params)).rejects.toThrow('ticket system down');
    await ai.models.generateContent(params);
    expect(system.tickets).toHaveLength(1);
  });

  test('toolErrorOutput: the error becomes the response the model reads', async () => {
    const system = ticketSystem();
    const fns = idempotentFunctions(failing({ left: 1 }, system), {
      store: createMemoryStore(),
      conversationId: 'x',
      toolErrorOutput: (error) => ({ error: (error as Error).message }),
    });
    const parts = await fns.run([{ name: 'create_ticket', args: { title: 'P' } }], {
      contents: 'Hi',
    });
    expect(parts).toEqual([
      { functionResponse: { name: 'create_ticket', response: { error: 'ticket system down' } } },
    ]);
  });
});

describe('developer errors: a ConfigurationError, thrown where the developer sees it', () => {
  const execute = () => ({ ok: true });
  const store = createMemoryStore();

  test('at wrap time: misspelt options, no store, unknown tool names, bad handlers and tools', async () => {
    expect(() =>
      idempotentFunctions({ a: { execute } }, { store, conversationID: 'x' } as never),
    ).toThrow(/did you mean "conversationId"/);
    expect(() => idempotentFunctions({ a: { execute } }, {} as never)).toThrow(ConfigurationError);
    expect(() => idempotentFunctions({ a: { execute } }, undefined as never)).toThrow(
      ConfigurationError,
    );
    expect(() =>
      idempotentFunctions({ a: { execute } }, { store, policies: { b: { ttl: 1000 } } }),
    ).toThrow(/policies names "b"/);
    expect(() => idempotentFunctions({ 'a b': { execute } }, { store })).toThrow(/not a tool name/);
    expect(() => idempotentFunctions({ a: (() => 1) as never }, { store })).toThrow(/must be \{/);
    expect(() => idempotentFunctions({ a: { execute } }, { store, conversationId: '' })).toThrow(
      /non-empty string/,
    );
    await expect(idempotentCallableTool({} as never, { store })).rejects.toThrow(/CallableTool/);
  });

  test('made idempotent twice: refused when wrapped again, nothing ran', async () => {
    const system = ticketSystem();
    const idempotency = createIdempotency({ store });
    const wrapped = idempotency.wrap('create_ticket', system.create);
    expect(() =>
      idempotentFunctions({ create_ticket: { execute: wrapped as never } }, { store }),
    ).toThrow(/"create_ticket" is already idempotent/);
    const fns = await idempotentCallableTool(ticketCallable(system), { idempotency });
    // The callable of idempotent functions, and their run as a handler, are idempotent already.
    const again = idempotentCallableTool(fns.callable({ turnId: 't1' }), { idempotency });
    await expect(again).rejects.toThrow(ConfigurationError);
    await expect(again).rejects.toThrow(/"create_ticket" is already idempotent/);
    expect(() =>
      idempotentFunctions({ create_ticket: { execute: fns.run as never } }, { store }),
    ).toThrow(ConfigurationError);
    expect(system.tickets).toHaveLength(0);
  });

  test('callable() without a conversation identity: thrown before the request is sent', async () => {
    const { server, system, fns } = await setup();
    for (const turn of [{ contents: 'Hi' }, {}, { conversationId: 'x' }]) {
      expect(() => fns.callable(turn)).toThrow(ConfigurationError);
    }
    expect(() => fns.callable({ contents: 'Hi' })).toThrow(/Pass conversationId/);
    expect(server.requests).toHaveLength(0);
    expect(system.tickets).toHaveLength(0);
  });

  test('run() without a conversation identity: thrown before anything runs', async () => {
    const { system, fns } = await setup();
    const call = { name: 'create_ticket', args: { title: 'P' } };
    await expect(fns.run([call], { contents: 'Hi' })).rejects.toThrow(ConfigurationError);
    await expect(fns.run({ functionCalls: [call] })).rejects.toThrow(ConfigurationError);
    expect(system.tickets).toHaveLength(0);
  });

  test('run() with an empty list, and a response without calls: no parts', async () => {
    const { fns } = await setup();
    expect(await fns.run([], {})).toEqual([]);
    expect(await fns.run({}, {})).toEqual([]);
  });
});

describe('the transcript: what the turn is made of', () => {
  test('systemInstruction, function responses and model steps are not part of it', async () => {
    const system = ticketSystem();
    const fns: IdempotentFunctions = idempotentFunctions(
      { create_ticket: { declaration: ticketDeclaration, execute: system.create } },
      { store: createMemoryStore(), conversationId: 'x' },
    );
    const call = { name: 'create_ticket', args: { title: 'P' } };
    const first: Content[] = [user('Hi')];
    const later: Content[] = [
      user('Hi'),
      { role: 'model', parts: [{ functionCall: call }] },
      { role: 'user', parts: [{ functionResponse: { name: 'create_ticket', response: {} } }] },
    ];
    await fns.run([call], { contents: first });
    await fns.run([call], { contents: later });
    await fns.run([call], { contents: 'Hi' }); // a string is the same user content
    expect(system.tickets).toHaveLength(1);
    // After a model answer, the same words are a new turn.
    await fns.run([call], {
      contents: [...first, { role: 'model', parts: [{ text: 'Ok' }] }, user('Hi')],
    });
    expect(system.tickets).toHaveLength(2);
  });

  test('a model content with a function call answers: the same words after its responses are a new turn', async () => {
    const system = ticketSystem();
    const fns = idempotentFunctions(
      { create_ticket: { declaration: ticketDeclaration, execute: system.create } },
      { store: createMemoryStore(), conversationId: 'x' },
    );
    const call = { name: 'create_ticket', args: { title: 'P' } };
    const answered: Content[] = [
      user('Yes'),
      { role: 'model', parts: [{ functionCall: call }] },
      { role: 'user', parts: [{ functionResponse: { name: 'create_ticket', response: {} } }] },
    ];
    await fns.run([call], { contents: [user('Yes')] });
    await fns.run([call], { contents: [...answered, user('Yes')] });
    expect(system.tickets).toHaveLength(2);
    // Without the responses too (another chat, whose app stopped on the call): it answered.
    await fns.run([call], { contents: [user('Yes')], conversationId: 'y' });
    const stopped = [...answered.slice(0, 2), user('Yes')];
    await fns.run([call], { contents: stopped, conversationId: 'y' });
    expect(system.tickets).toHaveLength(4);
  });
});
