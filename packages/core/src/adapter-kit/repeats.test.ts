import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { RETRY_SAFE_NOTE } from '../model-output.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { createDispatcher, type DispatchCall } from './dispatch-calls.js';
import {
  keyArgs,
  repeatNote,
  schemaHasProperty,
  takeRepeat,
  withRepeatNote,
  withRepeatProperty,
} from './repeats.js';

function configurationError(fn: () => unknown): ConfigurationError {
  try {
    fn();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

const repeats = { argument: 'repeat' };

/** A Standard Schema of an object with these properties only (extra ones are refused). */
const strictObject = (properties: Record<string, 'string' | 'boolean'>) => ({
  '~standard': {
    validate(value: unknown) {
      const v = value as Record<string, unknown>;
      const bad = Object.keys(v).find((k) => typeof v[k] !== properties[k]);
      return bad === undefined ? { value } : { issues: [{ message: 'not allowed', path: [bad] }] };
    },
    jsonSchema: {
      input: () => ({
        type: 'object',
        properties: Object.fromEntries(
          Object.entries(properties).map(([k, t]) => [k, { type: t }]),
        ),
      }),
    },
  },
});

describe('the repeat argument', () => {
  test('taken out of the args: 1 when left out; a bad value is the model error, nothing runs', () => {
    expect(takeRepeat({ to: 'a' }, 'remind', repeats)).toEqual({ args: { to: 'a' }, repeat: 1 });
    expect(takeRepeat({ to: 'a', repeat: 3 }, 'remind', repeats)).toEqual({
      args: { to: 'a' },
      repeat: 3,
    });
    expect(takeRepeat({ to: 'a', repeat: null }, 'remind', repeats)).toEqual({
      args: { to: 'a' },
      repeat: 1,
    });
    for (const bad of [0, -1, 1.5, '2', true, [2]]) {
      const taken = takeRepeat({ to: 'a', repeat: bad }, 'remind', repeats);
      expect('error' in taken && JSON.parse(taken.error)).toMatchObject({
        error: 'invalid_input',
        next: 'fix-input',
      });
    }
  });

  test('the key args: the first call keeps its key; a repeat of 2 or more is its own', () => {
    expect(keyArgs({ to: 'a' }, 1, repeats)).toEqual({ to: 'a' });
    expect(keyArgs({ to: 'a' }, 2, repeats)).toEqual({ to: 'a', repeat: 2 });
  });

  test('the schema gets the argument (not required); a clash or a non-object schema is refused', () => {
    const schema = { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] };
    expect(withRepeatProperty(schema, 'remind', repeats, 'wrap')).toEqual({
      type: 'object',
      properties: {
        to: { type: 'string' },
        repeat: expect.objectContaining({ type: 'integer', minimum: 1 }),
      },
      required: ['to'],
    });
    expect(withRepeatProperty(undefined, 'remind', repeats, 'wrap')).toMatchObject({
      type: 'object',
      properties: { repeat: { type: 'integer' } },
    });
    const clash = { type: 'object', properties: { repeat: { type: 'boolean' } } };
    expect(
      configurationError(() => withRepeatProperty(clash, 'remind', repeats, 'wrap')).option,
    ).toBe('policies.remind.repeatable');
    expect(() => withRepeatProperty({ type: 'string' }, 'remind', repeats, 'wrap')).toThrow(
      ConfigurationError,
    );
    expect(schemaHasProperty(strictObject({ repeat: 'boolean' }), 'repeat')).toBe(true);
    expect(schemaHasProperty(strictObject({ to: 'string' }), 'repeat')).toBe(false);
    expect(schemaHasProperty({ shape: { repeat: {} } }, 'repeat')).toBe(true);
    expect(schemaHasProperty(() => true, 'repeat')).toBeUndefined();
  });

  test('the description: the retry note, then how to repeat on purpose (once)', () => {
    const once = withRepeatNote('Send a reminder.', repeats);
    expect(once).toContain(RETRY_SAFE_NOTE);
    expect(once).toContain(
      'Calling this tool again with the same arguments in the same turn is treated as a retry and returns the first result. To do it again on purpose, pass repeat: 2 (3, ...).',
    );
    expect(withRepeatNote(once, repeats)).toBe(once);
    expect(repeatNote('times')).toContain('pass times: 2');
  });
});

describe('the repeatable policy option', () => {
  const spec = { caller: 'wrap', toolNames: ['remind', 'lookup'], repeatable: true, howTo: 'x' };
  const adapter = (policies: Record<string, unknown>, more: Record<string, unknown> = {}) =>
    createAdapter<unknown>(
      { store: createMemoryStore(), turnId: 't', policies, ...more } as never,
      spec,
    );

  test('off by default; true or { argument }; the executor never sees it', () => {
    expect(adapter({}).repeats('remind')).toBeUndefined();
    const on = adapter({ remind: { repeatable: true, ttl: 60_000 } });
    expect(on.repeats('remind')).toEqual({ argument: 'repeat' });
    expect(on.policy('remind')).toEqual({ ttl: 60_000 });
    expect(adapter({ remind: { repeatable: { argument: 'times' } } }).repeats('remind')).toEqual({
      argument: 'times',
    });
    expect(adapter({ remind: { repeatable: false } }).repeats('remind')).toBeUndefined();
  });

  test('refused: a misspelling (did you mean), a bad value, with businessKey / unsafe, an adapter without it', () => {
    expect(configurationError(() => adapter({ remind: { repeatabel: true } })).message).toMatch(
      /unknown option "repeatabel"; did you mean "repeatable"\?/,
    );
    expect(configurationError(() => adapter({ remind: { repeatable: 'yes' } })).option).toBe(
      'policies.remind.repeatable',
    );
    expect(
      configurationError(() => adapter({ remind: { repeatable: { argument: '2x' } } })).option,
    ).toBe('policies.remind.repeatable.argument');
    expect(configurationError(() => adapter({ remind: { repeatable: { arg: 'x' } } })).option).toBe(
      'policies.remind.repeatable.arg',
    );
    expect(
      configurationError(() =>
        adapter({ remind: { repeatable: true, businessKey: (a: { id: string }) => a.id } }),
      ).message,
    ).toMatch(/businessKey/);
    expect(
      configurationError(() => adapter({ remind: { repeatable: true } }, { unsafe: ['remind'] }))
        .message,
    ).toMatch(/unsafe/);
    expect(
      configurationError(() =>
        createAdapter<unknown>(
          {
            store: createMemoryStore(),
            turnId: 't',
            policies: { remind: { repeatable: true } },
          } as never,
          { ...spec, repeatable: false },
        ),
      ).message,
    ).toMatch(/does not support deliberate repeats/);
  });
});

describe('a dispatcher with a repeatable tool', () => {
  type Info = DispatchCall<{ turnId?: string }>;
  const make = (repeatable: unknown, schema?: unknown) => {
    const sent: unknown[] = [];
    const dispatcher = createDispatcher<Info>(
      {
        remind: {
          execute: (args: unknown) => {
            sent.push(args);
            return { sent: sent.length };
          },
          ...(schema === undefined ? {} : { schema }),
        },
      } as never,
      { store: createMemoryStore(), turnId: 'turn-1', policies: { remind: { repeatable } } },
      { caller: 'createToolDispatcher', howTo: 'turnId' },
    );
    const run = (args: unknown[]) =>
      dispatcher.run(
        args.map((a) => ({ name: 'remind', arguments: a })),
        { info: (toolName, a) => ({ toolName, args: a, request: {} }) },
      );
    return { dispatcher, sent, run };
  };

  test('same args: one effect; repeat 2: a second one; a retry of repeat 2 is replayed; the tool never sees repeat', async () => {
    const { sent, run } = make(true, strictObject({ to: 'string' }));
    const out: unknown[] = [];
    for (const args of [
      { to: 'ann' },
      { to: 'ann' },
      { to: 'ann', repeat: 2 },
      { to: 'ann', repeat: 2 },
      { to: 'ann', repeat: 1 },
    ]) {
      const [outcome] = await run([args]); // one after the other, in one turn
      out.push(outcome && 'output' in outcome ? outcome.output : outcome);
    }
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
    expect(out).toEqual([
      { sent: 1 },
      { sent: 1, replayed: true },
      { sent: 2 },
      { sent: 2, replayed: true },
      { sent: 1, replayed: true },
    ]);
  });

  test('a bad repeat is a model error, nothing ran; the schema and description the model sees', async () => {
    const { dispatcher, sent, run } = make(true);
    const [bad] = await run([{ to: 'ann', repeat: 0 }]);
    expect(JSON.parse((bad as { output: string }).output)).toMatchObject({
      error: 'invalid_input',
    });
    expect(sent).toEqual([]);
    const schema = { type: 'object', properties: { to: { type: 'string' } } };
    expect(dispatcher.parameters('remind', schema)).toMatchObject({
      properties: { to: { type: 'string' }, repeat: { type: 'integer', minimum: 1 } },
    });
    expect(dispatcher.parameters('other', schema)).toBe(schema);
    expect(dispatcher.describe({ name: 'remind', description: 'Remind.' }).description).toMatch(
      /pass repeat: 2 \(3, \.\.\.\)/,
    );
    const off = make(false);
    expect(off.dispatcher.parameters('remind', schema)).toBe(schema);
    expect(off.dispatcher.describe({ name: 'remind', description: undefined }).description).toBe(
      RETRY_SAFE_NOTE,
    );
  });

  test('a tool whose own schema has the argument is refused when the dispatcher is made', () => {
    expect(() => make(true, strictObject({ repeat: 'boolean' }))).toThrow(/has its own "repeat"/);
    expect(() => make({ argument: 'times' }, strictObject({ repeat: 'boolean' }))).not.toThrow();
  });
});
