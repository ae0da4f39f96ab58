import { createMemoryStore, RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '@idempotent-tools/core';
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/openai';
import type {
  ChatCompletionMessage,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { afterEach, describe, expect, test } from 'vitest';
import type { z } from 'zod';
import { ConfigurationError, createIdempotency, createToolDispatcher } from './index.js';
import {
  chatTools,
  chatTurn,
  client,
  responsesTools,
  responsesTurn,
  ticketArgs,
  ticketModel,
  ticketSystem,
  withRetries,
} from './test-utils/app.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function serve(options: Parameters<typeof startScriptedServer>[0]) {
  const server = await startScriptedServer(options);
  servers.push(server);
  return server;
}

function setup() {
  const system = ticketSystem();
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const tools = createToolDispatcher(idempotency, {
    create_ticket: {
      schema: ticketArgs,
      execute: (args: z.infer<typeof ticketArgs>) => system.create(args),
    },
  });
  return { system, idempotency, tools };
}

const user = (content: string): ChatCompletionMessageParam => ({ role: 'user', content });
const toolContents = (messages: ChatCompletionMessageParam[]) =>
  messages.filter((m) => m.role === 'tool').map((m) => JSON.parse(m.content as string));
const assistant = (
  ...calls: Array<[id: string, name: string, args: string]>
): ChatCompletionMessage => ({
  role: 'assistant',
  content: null,
  refusal: null,
  tool_calls: calls.map(([id, name, args]) => ({
    id,
    type: 'function',
    function: { name, arguments: args },
  })),
});

describe('Chat Completions over a flaky network (real openai client, local server)', () => {
  test('dropped connection, timeout, truncated body: the ticket is created once; the retry is replayed', async () => {
    const { system, tools } = setup();
    // 1st request dropped after it arrived (SDK retries), 2nd answers with the tool call.
    // After the tool ran: a timeout (SDK retries), then a truncated body (the app retries the turn).
    const server = await serve({
      respond: ticketModel,
      faults: ['drop', undefined, 'timeout', 'truncate'],
    });
    const history = [
      { role: 'system', content: 'You open tickets.' } as const,
      user('Printer on fire'),
    ];

    const { messages, text } = await withRetries(3, () =>
      chatTurn(client(server.baseURL), tools, history),
    );

    expect(system.tickets).toEqual([{ id: 'T-1', title: 'Printer on fire' }]);
    expect(server.requests.map((r) => r.fault ?? 'ok')).toEqual([
      'drop',
      'ok', // SDK retry: tool call (ran, ticket T-1)
      'timeout',
      'truncate', // the app gave up on this attempt
      'ok', // the app's retry of the turn: the same call, a new call id
      'ok', // final answer
    ]);
    const sentOutputs = toolContents(messages);
    expect(sentOutputs).toEqual([
      { ticket: 'T-1', title: 'Printer on fire', priority: 'normal', replayed: true },
    ]);
    expect(text).toContain('"replayed":true');
    // The two tool calls the model made had different ids: the key never used them.
    const callIds = server.requests
      .flatMap((r) => (r.body as { messages?: Array<{ tool_call_id?: string }> }).messages ?? [])
      .flatMap((m) => (m.tool_call_id ? [m.tool_call_id] : []));
    expect(new Set(callIds).size).toBe(2);
  });

  test('the same call again in a later step: one execution, the second output replayed', async () => {
    const { system, tools } = setup();
    const server = await serve({
      respond: (turn) =>
        turn.toolOutputs.length < 2
          ? { toolCalls: [{ name: 'create_ticket', arguments: { title: 'Broken VPN' } }] }
          : { content: 'ok' },
    });
    const { messages } = await chatTurn(client(server.baseURL), tools, [user('VPN broken')]);
    expect(system.tickets).toHaveLength(1);
    expect(toolContents(messages)).toEqual([
      { ticket: 'T-1', title: 'Broken VPN', priority: 'normal' },
      { ticket: 'T-1', title: 'Broken VPN', priority: 'normal', replayed: true },
    ]);
  });

  test('two identical calls in one message: one execution', async () => {
    const { system, tools } = setup();
    const call = { name: 'create_ticket', arguments: { title: 'Dup' } };
    const server = await serve({
      respond: (turn) =>
        turn.toolOutputs.length === 0 ? { toolCalls: [call, call] } : { content: 'ok' },
    });
    const { messages } = await chatTurn(client(server.baseURL), tools, [user('dup')]);
    expect(system.tickets).toHaveLength(1);
    const outputs = toolContents(messages);
    expect(outputs).toHaveLength(2);
    expect(outputs.filter((o) => o.replayed === true)).toHaveLength(1);
    expect(new Set(outputs.map((o) => o.ticket))).toEqual(new Set(['T-1']));
  });

  test('a new turn with the same args: a new execution', async () => {
    const { system, tools } = setup();
    const server = await serve({
      respond: (turn) =>
        turn.toolOutputs.length === 0
          ? { toolCalls: [{ name: 'create_ticket', arguments: { title: 'Same' } }] }
          : { content: 'ok' },
    });
    const openai = client(server.baseURL);
    const first = await chatTurn(openai, tools, [user('one')]);
    const second = await chatTurn(openai, tools, [...first.messages, user('another one')]);
    expect(system.tickets.map((t) => t.id)).toEqual(['T-1', 'T-2']);
    expect(toolContents(second.messages).at(-1)).toEqual({
      ticket: 'T-2',
      title: 'Same',
      priority: 'normal',
    });
  });
});

describe('Responses API over a flaky network', () => {
  test('dropped, 500, truncated: one execution; the retry replayed as a function_call_output', async () => {
    const { system, tools } = setup();
    const server = await serve({
      respond: ticketModel,
      faults: [{ status: 500 }, undefined, 'drop', 'truncate'],
    });
    const { input, text } = await withRetries(3, () =>
      responsesTurn(client(server.baseURL), tools, [{ role: 'user', content: 'Disk full' }]),
    );
    expect(system.tickets).toEqual([{ id: 'T-1', title: 'Disk full' }]);
    const outputs = input.filter((i) => i.type === 'function_call_output');
    expect(outputs).toHaveLength(1);
    expect(JSON.parse(outputs[0]?.output as string)).toEqual({
      ticket: 'T-1',
      title: 'Disk full',
      priority: 'normal',
      replayed: true,
    });
    expect(text).toContain('"replayed":true');
  });

  test('two identical function calls in one output: one execution; a string input is a turn', async () => {
    const { system, tools } = setup();
    const call = { name: 'create_ticket', arguments: { title: 'Twice' } };
    const server = await serve({
      respond: (turn) =>
        turn.toolOutputs.length === 0 ? { toolCalls: [call, call] } : { content: 'ok' },
    });
    const openai = client(server.baseURL);
    const response = await openai.responses.create({
      model: 'm',
      input: 'twice',
      tools: responsesTools,
    });
    const outputs = await tools.runResponses(response.output, {
      input: 'twice',
      conversationId: 'chat-1',
    });
    expect(outputs.map((o) => o.type)).toEqual(['function_call_output', 'function_call_output']);
    expect(outputs.map((o) => o.call_id)).toEqual(
      response.output.flatMap((o) => (o.type === 'function_call' ? [o.call_id] : [])),
    );
    expect(system.tickets).toHaveLength(1);
    const again = await tools.runResponses(response, {
      input: [{ role: 'user', content: 'twice' }],
      conversationId: 'chat-1',
    });
    expect(again.map((o) => JSON.parse(o.output as string).replayed)).toEqual([true, true]);
    expect(system.tickets).toHaveLength(1);
  });
});

describe('what the model reads when something is wrong', () => {
  const messages = { messages: [user('hi')], conversationId: 'chat-1' };

  test('drift (business key, other args) and outcome-unknown come back as tool messages', async () => {
    let runs = 0;
    const idempotency = createIdempotency({ store: createMemoryStore(), lease: 1000 });
    const tools = createToolDispatcher(
      idempotency,
      {
        create_customer: (args: { email: string; name: string }) => ({
          id: `cus_${++runs}`,
          ...args,
        }),
      },
      { policies: { create_customer: { businessKey: (args: { email: string }) => args.email } } },
    );
    const first = await tools.runChat(
      assistant(['c1', 'create_customer', '{"email":"a@x.io","name":"Ann"}']),
      messages,
    );
    expect(JSON.parse(first[0]?.content as string)).toEqual({
      id: 'cus_1',
      email: 'a@x.io',
      name: 'Ann',
    });
    const drift = await tools.runChat(
      assistant(['c2', 'create_customer', '{"email":"a@x.io","name":"Bob"}']),
      messages,
    );
    expect(JSON.parse(drift[0]?.content as string)).toMatchObject({
      error: 'drift',
      next: 'change-arguments',
    });
    expect(runs).toBe(1);

    // An attempt that died mid-way: its claim is left in_progress and its lease runs out.
    const args = { email: 'b@x.io', name: 'Bea' };
    const { key, fingerprint } = idempotency.keyOf(
      { toolName: 'create_customer', args },
      { businessKey: (a: typeof args) => a.email },
    );
    await idempotency.store.claim({
      key,
      fingerprint,
      token: 'dead',
      leaseMs: 1,
      ttlMs: 60_000,
      meta: { toolName: 'create_customer' },
    });
    await new Promise((r) => setTimeout(r, 5));
    const unknown = await tools.runChat(
      assistant(['c3', 'create_customer', JSON.stringify(args)]),
      messages,
    );
    const body = JSON.parse(unknown[0]?.content as string);
    expect(body).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });
    expect(body.message).toMatch(/Check whether it took effect/);
    expect(runs).toBe(1);
  });

  test('bad JSON, schema-invalid args (zod, ajv-style) and unknown tools: a clear error, nothing ran', async () => {
    let runs = 0;
    const ajvLike = Object.assign((v: unknown) => typeof (v as { n?: unknown }).n === 'number', {
      errors: [{ instancePath: '/n', message: 'must be number' }],
    });
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      create_ticket: { schema: ticketArgs, execute: () => ++runs },
      count: { schema: ajvLike, execute: () => ++runs },
    });
    const out = await tools.runChat(
      assistant(
        ['a', 'create_ticket', '{"title": '],
        ['b', 'create_ticket', '{"title": "", "priority": "urgent"}'],
        ['c', 'count', '{"n": "1"}'],
        ['d', 'delete_everything', '{}'],
      ),
      messages,
    );
    const bodies = out.map((m) => JSON.parse(m.content as string));
    expect(runs).toBe(0);
    for (const body of bodies)
      expect(body).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    expect(bodies[0].message).toMatch(/arguments of create_ticket are not valid JSON.*Nothing ran/);
    expect(bodies[1].message).toMatch(/title: .*; priority: .*Nothing ran/);
    expect(bodies[2].message).toMatch(/n: must be number/);
    expect(bodies[3].message).toMatch(/no tool named "delete_everything".*create_ticket, count/);
  });

  test("a tool's own error is rethrown after the other calls settled; the claim is released", async () => {
    const done: string[] = [];
    let fail = true;
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      pay: () => {
        if (fail) throw new Error('card processor down');
        done.push('pay');
        return 'paid';
      },
      note: async () => {
        await new Promise((r) => setTimeout(r, 20));
        done.push('note');
        return 'noted';
      },
    });
    const message = assistant(['a', 'pay', '{}'], ['b', 'note', '{}']);
    await expect(tools.runChat(message, messages)).rejects.toThrow('card processor down');
    expect(done).toEqual(['note']); // the sibling finished (and was stored) before the rethrow
    fail = false;
    const retry = await tools.runChat(message, messages);
    expect(done).toEqual(['note', 'pay']); // pay ran again: its claim was released
    expect(retry.map((m) => m.content)).toEqual(['paid', '{"result":"noted","replayed":true}']);

    const asOutput = createToolDispatcher(
      createIdempotency({ store: createMemoryStore() }),
      { pay: () => Promise.reject(new Error('declined')) },
      { toolErrorOutput: (error) => ({ error: (error as Error).message }) },
    );
    const out = await asOutput.runChat(assistant(['a', 'pay', '{"amount":1}']), messages);
    expect(out[0]?.content).toBe('{"error":"declined"}');
  });
});

describe('turn ids, scopes, replay shapes, options', () => {
  const message = assistant(['call_1', 'op', '{"x":1}']);

  test('the turn id: explicit wins; derived from the user messages with the conversation id', async () => {
    let runs = 0;
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      op: () => ++runs,
    });
    const convo = [user('a')];
    const conversationId = 'chat-1';
    await tools.runChat(message, { messages: convo, conversationId });
    // Same call id, more messages after the user message: the same turn.
    await tools.runChat(message, {
      messages: [...convo, message, { role: 'tool', tool_call_id: 'call_1', content: '1' }],
      conversationId,
    });
    expect(runs).toBe(1);
    const answered = [...convo, { role: 'assistant', content: 'done' } as const];
    await tools.runChat(message, { messages: [...answered, user('b')], conversationId }); // new turn
    expect(runs).toBe(2);
    await tools.runChat(message, { turnId: 'msg_42', messages: convo });
    await tools.runChat(assistant(['other_id', 'op', '{"x":1}']), { turnId: 'msg_42' });
    expect(runs).toBe(3);
    await expect(tools.runChat(message, { messages: [], conversationId })).rejects.toThrow(
      /a conversation id but no user message/,
    );
    await expect(tools.runChat(message)).rejects.toThrow(ConfigurationError);
    expect(runs).toBe(3);
  });

  test('scope: static, per call, per dispatch', async () => {
    let runs = 0;
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const byTenant = createToolDispatcher(
      idempotency,
      { op: () => ++runs },
      { scope: () => 'tenant-a' },
    );
    await byTenant.runChat(message, { turnId: 't' });
    await byTenant.runChat(message, { turnId: 't' });
    await byTenant.runChat(message, { turnId: 't', scope: 'tenant-b' });
    expect(runs).toBe(2);
  });

  test('replay shapes: object gets replayed: true; other values are wrapped; markFresh', async () => {
    const values: Record<string, unknown> = {
      obj: { a: 1 },
      str: 'done',
      num: 7,
      arr: [1],
      nil: null,
    };
    const handlers = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, () => v]));
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const tools = createToolDispatcher(idempotency, handlers);
    const msg = assistant(
      ...Object.keys(values).map((k) => [k, k, '{}'] as [string, string, string]),
    );
    const fresh = await tools.runChat(msg, { turnId: 't' });
    expect(fresh.map((m) => m.content)).toEqual(['{"a":1}', 'done', '7', '[1]', 'null']);
    const replay = await tools.runChat(msg, { turnId: 't' });
    expect(replay.map((m) => JSON.parse(m.content as string))).toEqual([
      { a: 1, replayed: true },
      { result: 'done', replayed: true },
      { result: 7, replayed: true },
      { result: [1], replayed: true },
      { result: null, replayed: true },
    ]);
    const marked = createToolDispatcher(idempotency, handlers, { markFresh: true });
    const out = await marked.runChat(msg, { turnId: 'fresh' });
    expect(JSON.parse(out[0]?.content as string)).toEqual({ a: 1, replayed: false });
  });

  test('exclude and unsafe tools run every time; describe adds the notes', async () => {
    let reads = 0;
    let sends = 0;
    const tools = createToolDispatcher(
      createIdempotency({ store: createMemoryStore() }),
      { read: () => ++reads, send: () => ++sends, create_ticket: () => 'ok' },
      { exclude: ['read'], unsafe: ['send'] },
    );
    const msg = assistant(['a', 'read', '{}'], ['b', 'send', '{}']);
    await tools.runChat(msg, { turnId: 't' });
    await tools.runChat(msg, { turnId: 't' });
    expect([reads, sends]).toEqual([2, 2]);
    const described = tools.describe([
      ...chatTools,
      { type: 'function', function: { name: 'read', description: 'Reads.' } },
      { type: 'function', function: { name: 'send' } },
    ]);
    expect(described[0]?.function.description).toBe(`Open a support ticket.\n\n${RETRY_SAFE_NOTE}`);
    expect(described[1]?.function.description).toBe('Reads.');
    expect(described[2]?.function.description).toBe(RETRY_UNSAFE_NOTE);
    expect(chatTools[0]?.function.description).toBe('Open a support ticket.'); // not mutated
    expect(tools.describe(responsesTools)[0]?.description).toContain(RETRY_SAFE_NOTE);
  });

  test('bad input is a typed error that says what to do', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    expect(() => createToolDispatcher(undefined as never, {})).toThrow(ConfigurationError);
    expect(() => createToolDispatcher(idempotency, { x: 42 as never })).toThrow(
      /handler of tool "x" must be a function or \{ execute, schema\? \}/,
    );
    expect(() => createToolDispatcher(idempotency, { x: () => 1 }, { exclude: ['y'] })).toThrow(
      /exclude names "y", but there is no such tool/,
    );
    expect(() =>
      createToolDispatcher(idempotency, { x: () => 1 }, { conversationld: 'c' } as never),
    ).toThrow(/did you mean "conversationId"\?/);
  });

  test('a handler made idempotent already (idempotency.wrap) is refused when the dispatcher is made', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const wrapped = idempotency.wrap('x', () => ++runs);
    for (const handler of [wrapped, { execute: wrapped }]) {
      expect(() => createToolDispatcher(idempotency, { x: handler })).toThrow(
        /tool "x" is already idempotent/,
      );
    }
    expect(runs).toBe(0);
  });
});

describe('Responses with the Conversations API (conversation)', () => {
  test('the turn start needs turnId (the input holds only the new message); its later steps find it', async () => {
    const sent: string[] = [];
    const server = await serve({
      respond: (turn) =>
        turn.toolOutputs.length < 2
          ? { toolCalls: [{ name: 'create_ticket', arguments: { title: 'VPN' } }] }
          : { content: 'ok' },
    });
    servers.push(server);
    const openai = client(server.baseURL);
    const tools = createToolDispatcher(createIdempotency({ store: createMemoryStore() }), {
      create_ticket: (args: { title: string }) => {
        sent.push(args.title);
        return { ticket: `T-${sent.length}` };
      },
    });
    const conversation = (await openai.conversations.create({})).id;
    const first = { conversation, input: 'The VPN is down.' };
    const response = await openai.responses.create({ model: 'm', ...first });
    await expect(
      tools.runResponses(response, { ...first, conversationId: 'chat-1' }),
    ).rejects.toThrow(/Conversations API conversation.*Pass turnId/);
    expect(sent).toEqual([]);
    const outputs = await tools.runResponses(response, { ...first, turnId: 'msg_7' });
    const next = { conversation, input: outputs };
    const again = await openai.responses.create({ model: 'm', ...next });
    const replayed = await tools.runResponses(again, next); // no turnId: linked to msg_7
    expect(sent).toEqual(['VPN']);
    expect(JSON.parse(replayed[0]?.output as string)).toEqual({ ticket: 'T-1', replayed: true });
  });
});
