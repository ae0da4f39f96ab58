import {
  createIdempotency,
  createMemoryStore,
  InvalidInputError,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
} from '@idempotent-tools/core';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import {
  DynamicStructuredTool,
  DynamicTool,
  StructuredTool,
  type StructuredToolInterface,
  tool,
} from '@langchain/core/tools';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { idempotentTool, idempotentTools } from './tools.js';
import { deriveTurnId } from './turn-id.js';
import { getIdempotencyKey, idempotencyOf, isIdempotentTool } from './wrap-tool.js';

const schema = z.object({ title: z.string() });
let callIds = 0;
/** Invoke a tool as a tool node does: with a tool call. */
const callTool = (t: StructuredToolInterface, args: object, config: object = {}) =>
  t.invoke(
    { type: 'tool_call', id: `call-${++callIds}`, name: t.name, args },
    config,
  ) as Promise<ToolMessage>;
const json = (message: ToolMessage) => JSON.parse(message.text) as unknown;

function counted<R>(result: (title: string) => R, extra: Record<string, unknown> = {}) {
  const runs: string[] = [];
  const t = tool(
    async ({ title }: { title: string }) => {
      runs.push(title);
      return result(title);
    },
    { name: 'create_ticket', description: 'Open a ticket.', schema, ...extra },
  );
  return { runs, tool: t };
}

describe('idempotentTool: a tool of the same kind', () => {
  test('same class, name and schema; the note in the description; the original untouched', () => {
    const { tool: original } = counted(() => 'ok');
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    expect(wrapped).toBeInstanceOf(DynamicStructuredTool);
    expect(wrapped.name).toBe('create_ticket');
    expect(wrapped.schema).toBe(original.schema);
    expect(wrapped.description).toBe(`Open a ticket.\n\n${RETRY_SAFE_NOTE}`);
    expect(original.description).toBe('Open a ticket.');
    expect(isIdempotentTool(wrapped)).toBe(true);
    expect(isIdempotentTool(original)).toBe(false);
    // Wrapping twice changes nothing.
    expect(idempotentTool(wrapped, { store: createMemoryStore() })).toBe(wrapped);
  });

  test('a StructuredTool subclass stays an instance of its class and runs once', async () => {
    class CreateUser extends StructuredTool {
      name = 'create_user';
      description = 'Create a user.';
      schema = z.object({ email: z.string() });
      runs = 0;
      async _call({ email }: { email: string }) {
        this.runs++;
        return { userId: `U-${this.runs}`, email };
      }
    }
    const original = new CreateUser();
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    expect(wrapped).toBeInstanceOf(CreateUser);
    const first = await callTool(wrapped, { email: 'a@x.io' });
    const second = await callTool(wrapped, { email: 'a@x.io' });
    expect(original.runs).toBe(1);
    expect(json(first)).toEqual({ userId: 'U-1', email: 'a@x.io' });
    expect(json(second)).toEqual({ userId: 'U-1', email: 'a@x.io', replayed: true });
  });

  test('a DynamicTool (string input) is keyed on its input', async () => {
    const runs: string[] = [];
    const original = new DynamicTool({
      name: 'send_sms',
      description: 'Send an SMS.',
      func: async (text) => {
        runs.push(text);
        return `sent ${text}`;
      },
    });
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    expect(wrapped).toBeInstanceOf(DynamicTool);
    expect(await wrapped.invoke('hi')).toBe('sent hi');
    expect(await wrapped.invoke('hi')).toEqual({ result: 'sent hi', replayed: true });
    expect(await wrapped.invoke('bye')).toBe('sent bye');
    expect(runs).toEqual(['hi', 'bye']);
  });
});

describe('the replay shape', () => {
  const cases: [string, (title: string) => unknown, unknown, unknown][] = [
    ['object', (t) => ({ id: t }), { id: 'x' }, { id: 'x', replayed: true }],
    ['string', (t) => `created ${t}`, 'created x', { result: 'created x', replayed: true }],
    ['number', () => 42, 42, { result: 42, replayed: true }],
    ['array', (t) => [t], ['x'], { result: ['x'], replayed: true }],
    ['null', () => null, null, { result: null, replayed: true }],
    [
      'object with its own replayed field',
      () => ({ replayed: 'no' }),
      { replayed: 'no' },
      { result: { replayed: 'no' }, replayed: true },
    ],
  ];
  test.each(cases)(
    '%s: fresh content unchanged, replay marked',
    async (_n, result, fresh, replay) => {
      const { runs, tool: original } = counted(result);
      const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
      const first = await callTool(wrapped, { title: 'x' });
      const second = await callTool(wrapped, { title: 'x' });
      expect(runs).toHaveLength(1);
      expect(typeof fresh === 'string' ? first.text : json(first)).toEqual(fresh);
      expect(json(second)).toEqual(replay);
      expect(idempotencyOf(first)).toMatchObject({ replayed: false, outcome: 'executed' });
      expect(idempotencyOf(second)).toMatchObject({ replayed: true, outcome: 'replayed' });
      expect(idempotencyOf(second)?.key).toMatch(/^v1_/);
      expect(second.status).toBe('success');
      expect(second.tool_call_id).not.toBe(first.tool_call_id);
    },
  );

  test('content and artifact: the content is marked, the artifact is kept', async () => {
    const { runs, tool: original } = counted((t) => [`created ${t}`, { rows: [t] }], {
      responseFormat: 'content_and_artifact',
    });
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    const first = await callTool(wrapped, { title: 'x' });
    const second = await callTool(wrapped, { title: 'x' });
    expect(runs).toHaveLength(1);
    expect([first.text, first.artifact]).toEqual(['created x', { rows: ['x'] }]);
    expect([json(second), second.artifact]).toEqual([
      { result: 'created x', replayed: true },
      { rows: ['x'] },
    ]);
  });

  test('content blocks get one more text block', async () => {
    const { tool: original } = counted((t) => [{ type: 'text', text: t }]);
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    await callTool(wrapped, { title: 'x' });
    const second = await callTool(wrapped, { title: 'x' });
    expect(second.content).toEqual([
      { type: 'text', text: 'x' },
      { type: 'text', text: '{"replayed":true}' },
    ]);
  });

  test('markFresh: fresh results say replayed: false', async () => {
    const { tool: original } = counted((t) => ({ id: t }));
    const wrapped = idempotentTool(original, {
      store: createMemoryStore(),
      turnId: 't',
      markFresh: true,
    });
    expect(json(await callTool(wrapped, { title: 'x' }))).toEqual({ id: 'x', replayed: false });
  });

  test('invoked without a tool call: the raw value, marked on replay', async () => {
    const { tool: original } = counted((t) => ({ id: t }));
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    expect(await wrapped.invoke({ title: 'x' })).toEqual({ id: 'x' });
    expect(await wrapped.invoke({ title: 'x' })).toEqual({ id: 'x', replayed: true });
  });
});

describe('keys, turns and scopes', () => {
  test('the tool reads the key from its config; it is the key in the metadata', async () => {
    const keys: (string | undefined)[] = [];
    const original = tool(
      async (_args, config) => {
        keys.push(getIdempotencyKey(config));
        return 'ok';
      },
      { name: 'charge', description: 'Charge.', schema: z.object({ cents: z.number() }) },
    );
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    const message = await callTool(wrapped, { cents: 5 });
    expect(keys).toEqual([idempotencyOf(message)?.key]);
  });

  test('scope and turnId functions: other scope or other turn, other execution', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, {
      store: createMemoryStore(),
      turnId: ({ config }) => config.configurable?.turn as string,
      scope: ({ config }) => (config.context as { tenant: string }).tenant,
    });
    const as = (tenant: string, turn: string) => ({ context: { tenant }, configurable: { turn } });
    await callTool(wrapped, { title: 'x' }, as('acme', 't1'));
    const replay = await callTool(wrapped, { title: 'x' }, as('acme', 't1'));
    await callTool(wrapped, { title: 'x' }, as('globex', 't1'));
    await callTool(wrapped, { title: 'x' }, as('acme', 't2'));
    expect(idempotencyOf(replay)?.replayed).toBe(true);
    expect(runs).toHaveLength(3);
  });

  test('the derived turn id comes from the state the tool node passes', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, { store: createMemoryStore() });
    const state = (id: string) => ({
      configurable: { thread_id: 'th' },
      state: { messages: [new HumanMessage({ content: 'hi', id })] },
    });
    await callTool(wrapped, { title: 'x' }, state('m1'));
    await callTool(wrapped, { title: 'x' }, state('m1'));
    await callTool(wrapped, { title: 'x' }, state('m2'));
    expect(runs).toHaveLength(2);
  });

  test('no turn id and no business key: InvalidInputError, nothing runs', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, { store: createMemoryStore() });
    const error = await callTool(wrapped, { title: 'x' }).catch((e: unknown) => e);
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('turnId');
    expect((error as Error).message).toMatch(/pass turnId/);
    expect(runs).toEqual([]);
  });

  test('a business key needs no turn', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, {
      store: createMemoryStore(),
      policy: { businessKey: (args) => args.title },
    });
    await callTool(wrapped, { title: 'x' });
    await callTool(wrapped, { title: 'x' });
    expect(runs).toHaveLength(1);
  });
});

describe('deriveTurnId', () => {
  const user = (content: string, id?: string) =>
    new HumanMessage({ content, ...(id ? { id } : {}) });
  test('thread id and the id of the last human message', () => {
    expect(deriveTurnId({ messages: [user('a', 'm1'), user('b', 'm2')], threadId: 't' })).toBe(
      '["t","m2"]',
    );
    expect(deriveTurnId({ messages: [user('a', 'm1')] })).toBe('[null,"m1"]');
    expect(deriveTurnId({ messages: [] })).toBeUndefined();
    expect(deriveTurnId({ messages: undefined })).toBeUndefined();
  });
  test('messages without ids: a hash of the conversation up to the last human message', () => {
    const turn = deriveTurnId({ messages: [user('a')], threadId: 't' });
    const later = deriveTurnId({
      messages: [user('a'), new ToolMessage({ content: 'x', tool_call_id: 'c' })],
      threadId: 't',
    });
    expect(turn).toMatch(/^\["t","t_[A-Za-z0-9_-]{43}"\]$/);
    expect(later).toBe(turn);
    expect(deriveTurnId({ messages: [user('b')], threadId: 't' })).not.toBe(turn);
    expect(deriveTurnId({ messages: [{ role: 'user', content: 'a' }], threadId: 't' })).toBe(turn);
  });
  test('a long id is hashed to fit', () => {
    expect(deriveTurnId({ messages: [user('a', 'm'.repeat(600))] })).toMatch(/^t_.{43}$/);
  });
});

describe('policies and tool lists', () => {
  test('excluded tools are returned as they are; unsafe tools get the note and run every time', async () => {
    const { runs, tool: page } = counted((t) => t);
    const lookup = tool(async () => 'sunny', {
      name: 'get_weather',
      description: 'Weather.',
      schema: z.object({}),
    });
    const [weather, pager] = idempotentTools([lookup, page], {
      store: createMemoryStore(),
      turnId: 't',
      exclude: ['get_weather'],
      unsafe: ['create_ticket'],
    });
    expect(weather).toBe(lookup);
    expect(pager?.description).toBe(`Open a ticket.\n\n${RETRY_UNSAFE_NOTE}`);
    await callTool(pager as StructuredToolInterface, { title: 'x' });
    await callTool(pager as StructuredToolInterface, { title: 'x' });
    expect(runs).toHaveLength(2);
  });

  test('isTerminalError: the stored failure reaches the model as do-not-retry', async () => {
    let runs = 0;
    const original = tool(
      async () => {
        runs++;
        throw Object.assign(new Error('card declined'), { code: 'card_declined' });
      },
      { name: 'charge', description: 'Charge.', schema: z.object({ cents: z.number() }) },
    );
    const [wrapped] = idempotentTools([original], {
      idempotency: createIdempotency({ store: createMemoryStore() }),
      turnId: 't',
      policies: {
        charge: { isTerminalError: (e) => (e as { code?: string }).code === 'card_declined' },
      },
    });
    const first = await callTool(wrapped as StructuredToolInterface, { cents: 5 }).catch((e) => e);
    expect((first as Error).message).toBe('card declined'); // the tool's own error, as it is
    const second = await callTool(wrapped as StructuredToolInterface, { cents: 5 });
    expect(runs).toBe(1);
    expect(second.status).toBe('error');
    expect(json(second)).toMatchObject({ error: 'replayed_failure', next: 'do-not-retry' });
  });

  test('a retryable tool error frees the key: the next call runs', async () => {
    let runs = 0;
    const original = tool(
      async () => {
        runs++;
        if (runs === 1) throw new Error('503');
        return 'ok';
      },
      { name: 'charge', description: 'Charge.', schema: z.object({ cents: z.number() }) },
    );
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    await expect(callTool(wrapped, { cents: 5 })).rejects.toThrow('503');
    expect((await callTool(wrapped, { cents: 5 })).text).toBe('ok');
    expect(runs).toBe(2);
  });
});

describe('options', () => {
  test('executor options inline: ttl and onEvent reach the executor', async () => {
    const { runs, tool: original } = counted((t) => t);
    const events: string[] = [];
    const wrapped = idempotentTool(original, {
      store: createMemoryStore(),
      ttl: 20,
      onEvent: (e) => events.push(e.outcome),
      turnId: 't',
    });
    await callTool(wrapped, { title: 'x' });
    await callTool(wrapped, { title: 'x' });
    await new Promise((r) => setTimeout(r, 30)); // the record expired
    await callTool(wrapped, { title: 'x' });
    expect(runs).toHaveLength(2);
    expect(events).toEqual(['executed', 'replayed', 'executed']);
  });

  test('policies are typed by tool name and arguments', () => {
    const createCustomer = tool(async ({ email }) => email, {
      name: 'create_customer',
      description: 'Create a customer.',
      schema: z.object({ email: z.string(), name: z.string() }),
    });
    const store = createMemoryStore();
    const [wrapped] = idempotentTools([createCustomer], {
      store,
      policies: { create_customer: { businessKey: (args) => args.email.toLowerCase() } },
      exclude: [],
    });
    expect(wrapped?.name).toBe('create_customer');
    const typo = { store, policies: { create_user: {} } };
    // @ts-expect-error: no tool of that name
    expect(() => idempotentTools([createCustomer], typo)).toThrow(/no tool named create_user/);
  });
});

describe('bad input: InvalidInputError that says what to do', () => {
  const store = createMemoryStore();
  const { tool: good } = counted(() => 'ok');
  const bad: [string, () => unknown, RegExp][] = [
    ['not a tool', () => idempotentTool({} as StructuredToolInterface, { store }), /tool\(\)/],
    ['null', () => idempotentTool(null as unknown as StructuredToolInterface, { store }), /null/],
    [
      'no name',
      () => idempotentTool(Object.assign(Object.create(good), { name: '' }), { store }),
      /has no name/,
    ],
    ['no store', () => idempotentTool(good, {} as never), /exactly one of \{ store \}/],
    [
      'store and idempotency',
      () => idempotentTool(good, { store, idempotency: createIdempotency({ store }) }),
      /exactly one/,
    ],
    [
      'turnId of a wrong type',
      () => idempotentTool(good, { store, turnId: 5 as unknown as string }),
      /string or a function/,
    ],
    ['tools not an array', () => idempotentTools({} as [], { store }), /array of tools/],
    [
      'a policy for an unknown tool',
      () => idempotentTools([good], { store, policies: { creat_ticket: {} } as never }),
      /no tool named creat_ticket; the tools are create_ticket/,
    ],
    [
      'exclude and unsafe at once',
      () =>
        idempotentTools([good], { store, exclude: ['create_ticket'], unsafe: ['create_ticket'] }),
      /both excluded and unsafe/,
    ],
  ];
  test.each(bad)('%s', (_name, make, message) => {
    let error: unknown;
    try {
      make();
    } catch (e) {
      error = e;
    }
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(message);
  });
});
