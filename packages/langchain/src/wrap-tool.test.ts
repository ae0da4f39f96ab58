import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  RETRY_SAFE_NOTE,
  RETRY_UNSAFE_NOTE,
} from '@idempotent-tools/core';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages';
import {
  DynamicStructuredTool,
  DynamicTool,
  StructuredTool,
  type StructuredToolInterface,
  tool,
} from '@langchain/core/tools';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { deriveTurnId } from './identity.js';
import { idempotentTool, idempotentTools } from './tools.js';
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
  });

  test('wrapping an idempotent tool again is refused when it is wrapped (was: returned as it was, the second options ignored); excluded, it is left as it is', () => {
    const { tool: original } = counted(() => 'ok');
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    const again = [
      () => idempotentTool(wrapped, { store: createMemoryStore(), turnId: 't' }),
      () => idempotentTools([wrapped], { store: createMemoryStore(), turnId: 't' }),
      () =>
        idempotentTool(idempotentTool(original, { store: createMemoryStore(), unsafe: true }), {
          store: createMemoryStore(),
          turnId: 't',
        }),
    ];
    for (const wrap of again) {
      let error: unknown;
      try {
        wrap();
      } catch (e) {
        error = e;
      }
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).option).toBe('tools');
      expect((error as Error).message).toMatch(/create_ticket.*already idempotent/);
    }
    const store = createMemoryStore();
    const [kept] = idempotentTools([wrapped], { store, exclude: ['create_ticket'] });
    expect(kept).toBe(wrapped);
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

  test('content blocks: the mark goes into the last text block (one more block only without text)', async () => {
    const { tool: original } = counted((t) => [
      { type: 'text', text: t },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } },
    ]);
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    await callTool(wrapped, { title: 'x' });
    const second = await callTool(wrapped, { title: 'x' });
    expect(second.content).toEqual([
      { type: 'text', text: 'x\n\n{"replayed":true}' },
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AA==' } },
    ]);
    const images = counted(() => [{ type: 'image_url', image_url: { url: 'data:,' } }]);
    const imageOnly = idempotentTool(images.tool, { store: createMemoryStore(), turnId: 't' });
    await callTool(imageOnly, { title: 'y' });
    expect((await callTool(imageOnly, { title: 'y' })).content).toEqual([
      { type: 'image_url', image_url: { url: 'data:,' } },
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

  test('a ToolMessage the tool built itself goes out as it built it when it runs (the executor round-trips values)', async () => {
    const { runs, tool: original } = counted(
      (t) =>
        new ToolMessage({ content: `opened ${t}`, tool_call_id: 'from-the-tool', artifact: { t } }),
    );
    const wrapped = idempotentTool(original, { store: createMemoryStore(), turnId: 't' });
    const first = await callTool(wrapped, { title: 'x' });
    expect(ToolMessage.isInstance(first)).toBe(true);
    expect(first.tool_call_id).toBe('from-the-tool');
    expect(first.artifact).toEqual({ t: 'x' });
    expect(runs).toEqual(['x']);
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

  test('the derived turn: thread_id + the user turns of the state; message ids are not part of it', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, { store: createMemoryStore() });
    const state = (thread: string, ...messages: unknown[]) => ({
      configurable: { thread_id: thread },
      state: { messages },
    });
    const hi = (id: string) => new HumanMessage({ content: 'hi', id });
    await callTool(wrapped, { title: 'x' }, state('th', hi('m1')));
    // The same turn with a fresh id (LangGraph's add_messages on a re-invoke): replayed.
    await callTool(wrapped, { title: 'x' }, state('th', hi('m2')));
    // Another thread, and a later turn with the same words: new actions.
    await callTool(wrapped, { title: 'x' }, state('other', hi('m1')));
    await callTool(
      wrapped,
      { title: 'x' },
      state('th', hi('m1'), new AIMessage('Done.'), hi('m3')),
    );
    expect(runs).toHaveLength(3);
  });

  test('configurable.turn_id is the turn, before the thread; the turnId option before both', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, { store: createMemoryStore() });
    const turn = (turn_id: string) => ({ configurable: { turn_id, thread_id: 'th' } });
    await callTool(wrapped, { title: 'x' }, turn('req-1'));
    await callTool(wrapped, { title: 'x' }, turn('req-1'));
    await callTool(wrapped, { title: 'x' }, turn('req-2'));
    expect(runs).toHaveLength(2);
    const explicit = idempotentTool(original, { store: createMemoryStore(), turnId: 'mine' });
    await callTool(explicit, { title: 'x' }, turn('req-3'));
    await callTool(explicit, { title: 'x' }, turn('req-4'));
    expect(runs).toHaveLength(3);
  });

  test('no thread, no turn_id, no options, no business key: a ConfigurationError naming them; nothing runs', async () => {
    const { runs, tool: original } = counted((t) => t);
    const wrapped = idempotentTool(original, { store: createMemoryStore() });
    const error = await callTool(wrapped, { title: 'x' }).catch((e: unknown) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).option).toBe('conversationId');
    expect((error as Error).message).toMatch(/thread_id.*conversationId.*turn_id.*turnId/);
    expect(runs).toEqual([]);
  });

  test('arguments the key cannot be made of are for the model (fix-input); a bad turn id from your resolver is thrown', async () => {
    const { runs, tool: original } = counted((t) => t);
    const big = idempotentTool(original, {
      store: createMemoryStore(),
      turnId: 't',
      maxArgsBytes: 20,
    });
    const message = await callTool(big, { title: 'x'.repeat(50) });
    expect(message.status).toBe('error');
    expect(json(message)).toMatchObject({ error: 'invalid_input', next: 'fix-input' });
    const long = idempotentTool(original, {
      store: createMemoryStore(),
      turnId: () => 't'.repeat(600),
    });
    const error = await callTool(long, { title: 'x' }).catch((e: unknown) => e);
    expect((error as { field?: string }).field).toBe('turnId');
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
  test('user content and position only: ids, system prompts and tool steps left out', () => {
    const turn = deriveTurnId({ messages: [user('a', 'm1')], threadId: 't' });
    expect(turn).toMatch(/^tc_[A-Za-z0-9_-]{43}$/);
    expect(deriveTurnId({ messages: [user('a')], threadId: 't' })).toBe(turn);
    const steps = [
      new SystemMessage('It is 09:00.'),
      user('a', 'other-id'),
      new AIMessage({ content: '', tool_calls: [{ id: 'c1', name: 'x', args: {} }] }),
      new ToolMessage({ content: 'x', tool_call_id: 'c1' }),
    ];
    expect(deriveTurnId({ messages: steps, threadId: 't' })).toBe(turn);
    expect(deriveTurnId({ messages: [{ role: 'user', content: 'a' }], threadId: 't' })).toBe(turn);
  });
  test('another thread, other words, or a later turn with the same words: another turn', () => {
    const turn = deriveTurnId({ messages: [user('a')], threadId: 't' });
    expect(deriveTurnId({ messages: [user('a')], threadId: 'u' })).not.toBe(turn);
    expect(deriveTurnId({ messages: [user('b')], threadId: 't' })).not.toBe(turn);
    const later = [user('a'), new AIMessage('Done.'), user('a')];
    expect(deriveTurnId({ messages: later, threadId: 't' })).not.toBe(turn);
    // Sent again before any answer (a lost reply): the same turn.
    expect(deriveTurnId({ messages: [user('a'), user('a')], threadId: 't' })).toBe(turn);
  });
  test('a run that ended on a tool result: by the tools of a createAgent (returnDirect), else refused when the words repeat', () => {
    const calls = (name: string, id = 'c1') =>
      new AIMessage({ content: '', tool_calls: [{ id, name, args: {} }] });
    const result = (name: string, status: 'success' | 'error' = 'success', id = 'c1') =>
      new ToolMessage({ content: 'ok', tool_call_id: id, name, status });
    const tools = [{ name: 'send' }, { name: 'send_now', returnDirect: true }];
    const derive = (messages: unknown[], withTools = true) =>
      deriveTurnId({ messages, threadId: 't', ...(withTools ? { tools } : {}) });
    const first = derive([user('a')]);
    const second = derive([user('a'), new AIMessage('Done.'), user('a')]);
    expect(second).not.toBe(first);
    // A non-returnDirect result with no model message after it: the run broke; the same turn.
    expect(derive([user('a'), calls('send'), result('send'), user('a')])).toBe(first);
    expect(derive([user('a'), calls('send'), user('a')])).toBe(first);
    // A returnDirect tool's result ended the run: answered; a new turn.
    expect(derive([user('a'), calls('send_now'), result('send_now'), user('a')])).toBe(second);
    // Its error goes back to the model: the run broke after it.
    const failed = [user('a'), calls('send_now'), result('send_now', 'error'), user('a')];
    expect(derive(failed)).toBe(first);
    // A result without a name is the call's (by tool_call_id).
    const unnamed = new ToolMessage({ content: 'ok', tool_call_id: 'c1' });
    expect(derive([user('a'), calls('send_now'), unnamed, user('a')])).toBe(second);
    // Answered in text after the tools: a new turn, with or without the tools.
    const texted = [user('a'), calls('send'), result('send'), new AIMessage('Sent.'), user('a')];
    expect(derive(texted)).toBe(second);
    expect(derive(texted, false)).toBe(second);
    // A tool it does not know, or no tools at all: cannot tell, refused.
    const refused = (messages: unknown[], withTools: boolean) => {
      try {
        derive(messages, withTools);
      } catch (error) {
        return (error as ConfigurationError).option;
      }
      return 'not refused';
    };
    const unknown = [user('a'), calls('other'), result('other'), user('a')];
    expect(refused(unknown, true)).toBe('turnId');
    expect(refused(unknown, false)).toBe('turnId');
    expect(refused([user('a'), calls('send'), result('send'), user('a')], false)).toBe('turnId');
    // Other words after such a run are a new turn either way.
    expect(derive([user('a'), calls('other'), result('other'), user('b')], false)).toBe(
      derive([user('a'), new AIMessage('Done.'), user('b')]),
    );
  });

  test('no human message: undefined', () => {
    expect(deriveTurnId({ messages: [], threadId: 't' })).toBeUndefined();
    expect(deriveTurnId({ messages: [new AIMessage('hi')], threadId: 't' })).toBeUndefined();
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
    // The store reads a clock the test moves: expiry does not depend on how fast the machine is.
    let now = Date.now();
    const wrapped = idempotentTool(original, {
      store: createMemoryStore({ now: () => now }),
      ttl: 20,
      onEvent: (e) => events.push(e.outcome),
      turnId: 't',
    });
    await callTool(wrapped, { title: 'x' });
    now += 19;
    await callTool(wrapped, { title: 'x' });
    now += 21; // the record expired
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
    expect(() => idempotentTools([createCustomer], typo)).toThrow(
      /"create_user", but there is no such tool/,
    );
  });
});

describe('bad setup: a ConfigurationError when the tools are wrapped, saying what to do', () => {
  const store = createMemoryStore();
  const { tool: good } = counted(() => 'ok');
  const bad: [string, () => unknown, RegExp][] = [
    ['not a tool', () => idempotentTool({} as StructuredToolInterface, { store }), /tool\(\)/],
    ['null', () => idempotentTool(null as unknown as StructuredToolInterface, { store }), /null/],
    [
      'no name',
      () => idempotentTool(Object.assign(Object.create(good), { name: '' }), { store }),
      /not a tool name/,
    ],
    [
      'a name the providers reject',
      () =>
        idempotentTool(Object.assign(Object.create(good), { name: 'create ticket' }), { store }),
      /no spaces/,
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
    [
      'a misspelt option',
      () => idempotentTool(good, { store, converstionId: 'c' } as never),
      /did you mean "conversationId"/,
    ],
    [
      'a bad policy',
      () => idempotentTool(good, { store, policy: { ttl: 0 } }),
      /policies\.create_ticket: ttl/,
    ],
    ['tools not an array', () => idempotentTools({} as [], { store }), /array of tools/],
    [
      'a policy for an unknown tool',
      () => idempotentTools([good], { store, policies: { creat_ticket: {} } as never }),
      /"creat_ticket", but there is no such tool. The tools are create_ticket/,
    ],
    [
      'exclude and unsafe at once',
      () =>
        idempotentTools([good], { store, exclude: ['create_ticket'], unsafe: ['create_ticket'] }),
      /in both exclude and unsafe/,
    ],
  ];
  test.each(bad)('%s', (_name, make, message) => {
    let error: unknown;
    try {
      make();
    } catch (e) {
      error = e;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(message);
  });
});
