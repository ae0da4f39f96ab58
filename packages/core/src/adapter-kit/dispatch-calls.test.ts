import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createMemoryStore } from '../memory-store.js';
import { createAdapter } from './adapter.js';
import { dispatchCalls, requestIdentity } from './dispatch-calls.js';

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
