import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import {
  createDispatcher,
  dispatchCalls,
  outputsOf,
  presentDefinition,
  requestIdentity,
} from './dispatch-calls.js';

type Info = { toolName: string; args: unknown; request: { conversationId?: string; text: string } };
const adapterOf = (options: Record<string, unknown> = {}) =>
  createAdapter<Info>(
    {
      store: createMemoryStore(),
      ...options,
      ...requestIdentity<Info>(options, 'dispatch'),
    } as never,
    {
      caller: 'dispatch',
      toolNames: ['charge', 'read'],
      transcript: (call) => [{ role: 'user', content: call.request.text }],
      howTo: 'conversationId',
    },
  );

describe('dispatchCalls', () => {
  const effects: string[] = [];
  const handler = (name: string) =>
    name === 'charge' || name === 'read'
      ? {
          execute: (args: unknown) => {
            effects.push(name);
            if ((args as { fail?: boolean }).fail) throw new Error('tool failed');
            return { ok: name };
          },
        }
      : undefined;
  const options = (request: Info['request']) => ({
    names: ['charge', 'read'],
    handler,
    info: (toolName: string, args: unknown) => ({ toolName, args, request }),
  });

  test('identical calls run once; unknown tools and bad JSON are model errors; nothing else runs', async () => {
    effects.length = 0;
    const adapter = adapterOf();
    const request = { conversationId: 'c', text: 'hi' };
    const out = await dispatchCalls(
      adapter,
      [
        { name: 'charge', arguments: '{"n":1}' },
        { name: 'charge', arguments: { n: 1 } },
        { name: 'nope', arguments: '{}' },
        { name: 'charge', arguments: '{oops' },
      ],
      options(request),
    );
    expect(effects).toEqual(['charge']);
    expect(out[0]).toEqual({ output: { ok: 'charge' } });
    expect(out[1]).toEqual({ output: { ok: 'charge', replayed: true } });
    expect(JSON.parse((out[2] as { output: string }).output)).toMatchObject({
      error: 'invalid_input',
    });
    expect((out[3] as { output: string }).output).toContain('not valid JSON');
  });

  test('no identity: the developer error is thrown before any call runs', async () => {
    effects.length = 0;
    const calls = [
      { name: 'read', arguments: '{}' },
      { name: 'charge', arguments: '{}' },
    ];
    await expect(dispatchCalls(adapterOf(), calls, options({ text: 'hi' }))).rejects.toThrow(
      ConfigurationError,
    );
    expect(effects).toEqual([]);
  });

  test("the tool's own error comes back with its call; the claim is released", async () => {
    effects.length = 0;
    const adapter = adapterOf();
    const request = { conversationId: 'c', text: 'hi' };
    const call = [{ name: 'charge', arguments: { fail: true } }];
    const [first] = await dispatchCalls(adapter, call, options(request));
    expect(first).toMatchObject({ error: new Error('tool failed'), call: { toolName: 'charge' } });
    await dispatchCalls(adapter, call, options(request));
    expect(effects).toEqual(['charge', 'charge']);
  });
});

describe('requestIdentity', () => {
  test("the request's own value wins over the option's; bad options are refused", () => {
    const ids = requestIdentity<Info>({ conversationId: 'opt', scope: () => 'tenant' }, 'dispatch');
    const call = (conversationId?: string): Info => ({
      toolName: 'charge',
      args: {},
      request: { text: 'hi', ...(conversationId === undefined ? {} : { conversationId }) },
    });
    expect(typeof ids.conversationId === 'function' && ids.conversationId(call('req'))).toBe('req');
    expect(typeof ids.conversationId === 'function' && ids.conversationId(call())).toBe('opt');
    expect(typeof ids.scope === 'function' && ids.scope(call())).toBe('tenant');
    expect(() => requestIdentity<Info>({ turnId: '' }, 'dispatch')).toThrow(/non-empty string/);
  });
});

describe('createDispatcher', () => {
  type Call = { toolName: string; args: unknown; request: { turnId?: string; scope?: string } };
  const make = (handlers: Record<string, unknown>, options: Record<string, unknown> = {}) =>
    createDispatcher<Call>(
      handlers as never,
      { store: createMemoryStore(), conversationId: 'c', ...options } as never,
      { caller: 'createToolDispatcher', howTo: 'turnId', transcript: () => undefined },
    );

  test('handlers are checked when it is made; a function is { execute }', () => {
    expect(() => make({ charge: 42 })).toThrow(
      'createToolDispatcher: the handler of tool "charge" must be a function or { execute, schema? }.',
    );
    expect(() => make({}, { unsafe: ['charge'] })).toThrow(/no such tool/);
    const fn = () => 1;
    const d = make({ charge: fn, read: { execute: fn } });
    expect(d.names).toEqual(['charge', 'read']);
    expect(d.handler('charge')).toEqual({ execute: fn });
    expect(d.handler('constructor')).toBeUndefined();
  });

  test("describe: the retry note by treatment; excluded and strangers' are left as they are", () => {
    const d = make({ a: () => 1, b: () => 1, c: () => 1 }, { exclude: ['b'], unsafe: ['c'] });
    const tool = (name: string) => ({ name, description: 'Does.', type: 'custom' });
    expect(d.describe(tool('a'))).toMatchObject({ type: 'custom', description: /^Does\.\n\nSafe/ });
    const [b, zzz] = [tool('b'), tool('zzz')];
    expect(d.describe(b)).toBe(b);
    expect(d.describe(tool('c')).description).toMatch(/^Does\.\n\nNot safe to retry/);
    expect(d.describe(zzz)).toBe(zzz);
  });

  test("the request's turn and scope win; an unwrapped call without a turn keeps its scope", async () => {
    const seen: unknown[] = [];
    const d = make(
      { charge: (_: unknown, ctx: { turnId?: string; scope?: string }) => seen.push(ctx) },
      { conversationId: undefined, turnId: () => undefined, unsafe: ['charge'], scope: 'opt' },
    );
    const run = (request: Call['request']) =>
      d.run([{ name: 'charge', arguments: '{}' }], {
        info: (toolName, args) => ({ toolName, args, request }),
      });
    await run({ turnId: 't', scope: 'req' });
    await run({});
    expect(seen).toMatchObject([
      { turnId: 't', scope: 'req' },
      { turnId: undefined, scope: 'opt' },
    ]);
  });

  test('presentDefinition: the note, the repeat argument in the named field; excluded and strangers as they are', () => {
    const d = make(
      { a: () => 1, b: () => 1, r: () => 1 },
      { exclude: ['b'], policies: { r: { repeatable: true } } },
    );
    const tool = (name: string) => ({
      name,
      description: 'Does.',
      input_schema: { type: 'object' },
    });
    const caller = 'createToolDispatcher';
    const field = 'input_schema';
    const a = tool('a');
    expect(presentDefinition(d, a, { caller, field })).toEqual({
      ...a,
      description: expect.stringMatching(/^Does\.\n\nSafe/),
    });
    const [b, zzz] = [tool('b'), tool('zzz')];
    expect(presentDefinition(d, b, { caller, field })).toBe(b);
    expect(presentDefinition(d, zzz, { caller, field })).toBe(zzz);
    const r = presentDefinition(d, tool('r'), { caller, field, strict: true });
    expect(r.description).toMatch(/repeat: 2/);
    expect(r.input_schema).toMatchObject({ properties: { repeat: {} }, required: ['repeat'] });
    const bare: { name: string; description?: string } = { name: 'r' }; // no field: the note only
    expect(presentDefinition(d, bare, { caller })).toEqual({
      name: 'r',
      description: expect.stringMatching(/repeat: 2/),
    });
    const openApi = { name: 'r', parameters: { type: 'OBJECT', properties: {} } };
    expect(
      presentDefinition(d, openApi, { caller, field: 'parameters', openApi: true }).parameters,
    ).toMatchObject({ properties: { repeat: { type: 'INTEGER' } } });
    const clash = { name: 'r', input_schema: { type: 'object', properties: { repeat: {} } } };
    expect(() => presentDefinition(d, clash, { caller, field })).toThrow(ConfigurationError);
  });

  test('checkTurn: a request whose turn is unknown is refused before anything is sent', () => {
    const d = make({ charge: () => 1 }, { conversationId: undefined, turnId: undefined });
    expect(() => d.checkTurn({})).toThrow(/cannot be told apart/);
    expect(() => d.checkTurn({ turnId: 't' })).not.toThrow();
    // A function of the call may know the turn only from the call: nothing to check yet.
    const later = make({ charge: () => 1 }, { conversationId: undefined, turnId: () => 't' });
    expect(() => later.checkTurn({})).not.toThrow();
  });
});

describe('outputsOf', () => {
  test("the tool's own error: answered by toolErrorOutput, else the first is thrown", () => {
    const call = { toolName: 'charge', args: { n: 1 } };
    const outcomes = [
      { output: 1 },
      { error: new Error('a'), call },
      { error: new Error('b'), call },
    ];
    expect(() => outputsOf(outcomes, undefined)).toThrow('a');
    expect(outputsOf(outcomes, (e, c) => `${(e as Error).message} ${c.toolName}`)).toEqual([
      1,
      'a charge',
      'b charge',
    ]);
  });
});
