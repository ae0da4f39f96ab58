import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';

type Info = { chat?: string; text?: string };
const spec = {
  caller: 'wrapTools',
  toolNames: ['charge', 'lookup'],
  transcript: (call: Info) =>
    call.text === undefined ? undefined : [{ role: 'user' as const, content: call.text }],
  howTo: 'conversationId (your chat id) or turnId',
};

function configurationError(fn: () => unknown): ConfigurationError {
  try {
    fn();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

describe('createAdapter', () => {
  test('a setup that can never tell conversations apart is refused when the tools are wrapped', () => {
    const error = configurationError(() =>
      createAdapter<Info>({ store: createMemoryStore() }, spec),
    );
    expect(error.option).toBe('conversationId');
    expect(error.message).toMatch(
      /wrapTools: .*charge, lookup would replay one user's call to another user/,
    );
    // A business key on every wrapped tool, or excluding the rest, needs no turn.
    expect(() =>
      createAdapter<Info>(
        {
          store: createMemoryStore(),
          policies: { charge: { businessKey: (a: { id: string }) => a.id } },
          exclude: ['lookup'],
        },
        spec,
      ),
    ).not.toThrow();
  });

  test('misspelt options name the right one', () => {
    const store = createMemoryStore();
    expect(
      configurationError(() =>
        createAdapter<Info>({ store, conversationId: 'c', onstale: 'x' } as never, spec),
      ),
    ).toMatchObject({
      option: 'onstale',
      message: expect.stringContaining('did you mean "onStale"?'),
    });
    expect(
      configurationError(() => createAdapter<Info>({ store, converstionId: 'c' } as never, spec))
        .message,
    ).toContain('did you mean "conversationId"?');
  });

  test('policies are validated at wrap time, with the tool and field named', () => {
    const store = createMemoryStore();
    const bad = configurationError(() =>
      createAdapter<Info>({ store, conversationId: 'c', policies: { charge: { ttl: 0 } } }, spec),
    );
    expect(bad.option).toBe('policies.charge.ttl');
    const typo = configurationError(() =>
      createAdapter<Info>(
        { store, conversationId: 'c', policies: { charge: { onstale: 'reexecute' } as never } },
        spec,
      ),
    );
    expect(typo.message).toContain('did you mean "onStale"?');
    expect(
      configurationError(() =>
        createAdapter<Info>({ store, conversationId: 'c', policies: { chrage: {} } }, spec),
      ).message,
    ).toMatch(/policies names "chrage", but there is no such tool/);
  });

  test('tool names the providers reject are refused', () => {
    const error = configurationError(() =>
      createAdapter<Info>(
        { store: createMemoryStore(), conversationId: 'c' },
        { ...spec, toolNames: ['create ticket'] },
      ),
    );
    expect(error.option).toBe('toolName');
  });

  test('exactly one of store or idempotency; executor options with a shared executor are refused', () => {
    expect(
      configurationError(() => createAdapter<Info>({ conversationId: 'c' } as never, spec)).option,
    ).toBe('store');
    const idempotency = createIdempotency({ store: createMemoryStore() });
    expect(
      configurationError(() =>
        createAdapter<Info>({ idempotency, conversationId: 'c', ttl: 5 } as never, spec),
      ).option,
    ).toBe('ttl');
    expect(createAdapter<Info>({ idempotency, conversationId: 'c' }, spec).executor).toBe(
      idempotency,
    );
  });

  test('identify: the turn from the conversation, scope per call; refused without identity', () => {
    const adapter = createAdapter<Info>(
      { store: createMemoryStore(), conversationId: (c) => c.chat, scope: (c) => c.chat },
      spec,
    );
    const a = adapter.identify({ chat: 'a', text: 'Cancel.' }, 'charge');
    const b = adapter.identify({ chat: 'b', text: 'Cancel.' }, 'charge');
    expect(a.turnId).toMatch(/^tc_/);
    expect(a.turnId).not.toBe(b.turnId);
    expect(a.scope).toBe('a');
    expect(configurationError(() => adapter.identify({ text: 'Cancel.' }, 'charge')).option).toBe(
      'conversationId',
    );
  });

  test("policyFields: an adapter's own policy field is checked, kept from the executor, read back", () => {
    const store = createMemoryStore();
    const policyFields = {
      approval: (value: unknown, tool: { toolName: string; treatment: string }) => {
        if (tool.treatment !== 'wrap') throw new ConfigurationError({ option: 'x', message: 'no' });
        return value === true ? { asks: tool.toolName } : undefined;
      },
    };
    const adapter = createAdapter<Info>(
      { store, conversationId: 'c', policies: { charge: { approval: true, ttl: 1000 } as never } },
      { ...spec, policyFields },
    );
    expect(adapter.policyField('charge', 'approval')).toEqual({ asks: 'charge' });
    expect(adapter.policyField('lookup', 'approval')).toBeUndefined();
    expect(adapter.policy('charge')).toEqual({ ttl: 1000 });
    const typo = configurationError(() =>
      createAdapter<Info>(
        { store, conversationId: 'c', policies: { charge: { aproval: true } as never } },
        { ...spec, policyFields },
      ),
    );
    expect(typo.message).toContain('did you mean "approval"?');
    expect(
      configurationError(() =>
        createAdapter<Info>(
          {
            store,
            conversationId: 'c',
            unsafe: ['charge'],
            policies: { charge: { approval: true } as never },
          },
          { ...spec, policyFields },
        ),
      ).message,
    ).toBe('no');
    // Without the spec the field is a misspelt one.
    expect(() =>
      createAdapter<Info>(
        { store, conversationId: 'c', policies: { charge: { approval: true } as never } },
        spec,
      ),
    ).toThrow(ConfigurationError);
  });

  test("optionChecks: an adapter's own options are taken and checked; a gone one is refused", () => {
    const store = createMemoryStore();
    const optionChecks = {
      window: (value: unknown) =>
        Number.isInteger(value)
          ? undefined
          : `window must be a whole number, got ${String(value)}.`,
      oldOption: () => 'oldOption is gone: use window.',
      conversationId: () => 'conversationId cannot work here: use turnId.',
    };
    const ok = { store, turnId: 't', window: 5 } as never;
    expect(createAdapter<Info>(ok, { ...spec, optionChecks }).treatment('charge')).toBe('wrap');
    const bad = (options: object) =>
      configurationError(() => createAdapter<Info>(options as never, { ...spec, optionChecks }));
    expect(bad({ store, turnId: 't', window: 1.5 })).toMatchObject({
      option: 'window',
      message: 'wrapTools: window must be a whole number, got 1.5.',
    });
    expect(bad({ store, turnId: 't', oldOption: true })).toMatchObject({ option: 'oldOption' });
    // A kit option the adapter cannot use is refused before the kit looks at it.
    expect(bad({ store, conversationId: 'c' })).toMatchObject({
      option: 'conversationId',
      message: 'wrapTools: conversationId cannot work here: use turnId.',
    });
    // Without the spec the option is a misspelt one.
    expect(() => createAdapter<Info>(ok, spec)).toThrow(ConfigurationError);
  });
});
