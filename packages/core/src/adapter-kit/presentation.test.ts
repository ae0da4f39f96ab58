import { createRequire } from 'node:module';
import { describe, expect, test } from 'vitest';
import { RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '../model-output.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { presentTool, type StandardJsonSchema } from './presentation.js';

const load = createRequire(import.meta.url);

function adapter() {
  return createAdapter<never>(
    {
      store: createMemoryStore(),
      conversationId: 'c',
      policies: { send: { repeatable: true } },
      exclude: ['read'],
      unsafe: ['deploy'],
    },
    {
      caller: 'test',
      toolNames: ['send', 'charge', 'read', 'deploy'],
      repeatable: true,
      howTo: 'conversationId',
      transcript: () => [],
    },
  );
}

describe('presentTool: one presentation of a tool for every adapter', () => {
  test('the description note by treatment: retry-safe, not safe to retry, as it is, how to repeat', () => {
    const a = adapter();
    expect(presentTool(a, 'charge', 'test').describe('Charges.')).toContain(RETRY_SAFE_NOTE);
    expect(presentTool(a, 'deploy', 'test').describe('Deploys.')).toContain(RETRY_UNSAFE_NOTE);
    expect(presentTool(a, 'read', 'test').describe('Reads.')).toBe('Reads.');
    expect(presentTool(a, 'send', 'test').describe('Sends.')).toMatch(/repeat: 2/);
  });

  test('JSON Schema: the repeat argument added (strict: required and nullable); not repeatable: the same object', () => {
    const a = adapter();
    const schema = { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] };
    const send = presentTool(a, 'send', 'test');
    expect(send.jsonSchema(schema)).toMatchObject({
      properties: { to: { type: 'string' }, repeat: { type: 'integer', minimum: 1 } },
      required: ['to'],
    });
    expect(send.jsonSchema(schema, true)).toMatchObject({ required: ['to', 'repeat'] });
    expect(presentTool(a, 'charge', 'test').jsonSchema(schema)).toBe(schema);
    const clash = { type: 'object', properties: { repeat: { type: 'string' } } };
    expect(() => send.jsonSchema(clash)).toThrow(
      expect.objectContaining({ code: 'configuration' }),
    );
  });

  test('a Standard Schema with JSON Schema: the model sees the argument; the rest is validated by the tool schema; the argument kept for the pipeline', async () => {
    const send = presentTool(adapter(), 'send', 'test');
    const own = {
      '~standard': {
        version: 1 as const,
        vendor: 'test',
        validate: (value: unknown) =>
          typeof (value as { to?: unknown }).to === 'string'
            ? { value: { to: (value as { to: string }).to.trim() } }
            : { issues: [{ message: 'to is required' }] },
        jsonSchema: {
          input: () => ({ type: 'object', properties: { to: { type: 'string' } } }),
          output: () => ({ type: 'object', properties: { to: { type: 'string' } } }),
        },
      },
    };
    const wrapped = send.standardSchema(own);
    const standard = (wrapped as StandardJsonSchema)['~standard'];
    expect(standard.jsonSchema.input({ target: 'draft-2020-12' })).toMatchObject({
      properties: { repeat: { type: 'integer' } },
    });
    expect(await standard.validate({ to: ' ann ', repeat: 2 })).toEqual({
      value: { to: 'ann', repeat: 2 },
    });
    expect(await standard.validate({ repeat: 2 })).toMatchObject({ issues: [{}] });
    expect(send.strip({ to: 'ann', repeat: 2 })).toEqual({ to: 'ann' });
  });

  test("stripped: the tool's own callback gets the input without the repeat argument", () => {
    const send = presentTool(adapter(), 'send', 'test');
    const gate = (context: string, input: unknown, id?: string) => [context, input, id];
    const stripped = send.stripped(gate, 1);
    expect(stripped('ctx', { to: 'ann', repeat: 2 }, 'c1')).toEqual(['ctx', { to: 'ann' }, 'c1']);
    expect(stripped.length).toBe(3);
    expect(send.stripped((input: unknown) => input)({ to: 'ann', repeat: 2 })).toEqual({
      to: 'ann',
    });
    expect(send.stripped(true)).toBe(true);
    // Not repeatable: the callback as it is.
    expect(presentTool(adapter(), 'charge', 'test').stripped(gate)).toBe(gate);
  });

  test('zod 4 and zod 3 objects extended with zod of the same major version', () => {
    const send = presentTool(adapter(), 'send', 'test');
    const z4 = load('zod') as typeof import('zod');
    const v4 = send.zodSchema(z4.object({ to: z4.string() }), load) as ReturnType<typeof z4.object>;
    expect(v4.parse({ to: 'ann', repeat: 2 })).toEqual({ to: 'ann', repeat: 2 });
    expect(() => v4.parse({ to: 'ann', repeat: 0 })).toThrow();
    const z3 = load('zod/v3') as typeof import('zod/v3');
    const v3 = send.zodSchema(z3.object({ to: z3.string() }), load) as ReturnType<typeof z3.object>;
    expect(v3.parse({ to: 'ann', repeat: 3 })).toEqual({ to: 'ann', repeat: 3 });
    expect(() => send.zodSchema(z4.object({ repeat: z4.string() }), load)).toThrow(
      expect.objectContaining({ option: 'policies.send.repeatable' }),
    );
  });

  test("OpenAPI-style (Gemini's parameters): the argument as an INTEGER property; a clash refused", () => {
    const send = presentTool(adapter(), 'send', 'test');
    const schema = { type: 'OBJECT', properties: { to: { type: 'STRING' } }, required: ['to'] };
    expect(send.openApiSchema(schema)).toEqual({
      ...schema,
      properties: { to: { type: 'STRING' }, repeat: expect.objectContaining({ type: 'INTEGER' }) },
    });
    expect(send.openApiSchema(undefined)).toMatchObject({
      type: 'OBJECT',
      properties: { repeat: {} },
    });
    expect(presentTool(adapter(), 'charge', 'test').openApiSchema(schema)).toBe(schema);
    const clash = { type: 'OBJECT', properties: { repeat: { type: 'STRING' } } };
    expect(() => send.openApiSchema(clash)).toThrow(
      expect.objectContaining({ option: 'policies.send.repeatable' }),
    );
  });
});
