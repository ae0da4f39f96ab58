import { createRequire } from 'node:module';
import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { isWrapped } from '../executor/wrapped.js';
import { RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '../model-output.js';
import { createMemoryStore } from '../store/memory-store.js';
import { presentTool } from './presentation.js';
import {
  checkToolInstance,
  createInstanceAdapter,
  plainDefinition,
  presentSchema,
  wrapEachOnce,
  wrapToolInstance,
} from './tool-instances.js';

const load = createRequire(import.meta.url);

/** A framework's tool class, checked by class and method as LangChain checks its tools. */
class FrameworkTool {
  constructor(
    readonly name: string,
    readonly description: string,
    readonly schema: unknown = { type: 'object', properties: { to: { type: 'string' } } },
  ) {}
  responseFormat = 'content_and_artifact';
  run(input: unknown) {
    return `ran ${JSON.stringify(input)}`;
  }
}

const SPEC = { caller: 'wrapIt', takes: 'framework tools', method: 'run', howTo: 'conversationId' };
const tools = () => [
  new FrameworkTool('send', 'Sends.'),
  new FrameworkTool('read', 'Reads.'),
  new FrameworkTool('deploy', 'Deploys.'),
];
const adapterOf = (list: unknown[]) =>
  createInstanceAdapter<never>(
    list,
    {
      store: createMemoryStore(),
      conversationId: 'c',
      policies: { send: { repeatable: true } },
      exclude: ['read'],
      unsafe: ['deploy'],
    },
    { ...SPEC, repeatable: true, transcript: () => [] },
  );
const thrown = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  return undefined;
};

describe('createInstanceAdapter / checkToolInstance: an array of tool instances, checked', () => {
  test('not an array, an entry without the method, null: a ConfigurationError naming what to pass', () => {
    expect(thrown(() => adapterOf({} as never))?.message).toMatch(/wrapIt takes an array of tools/);
    const noMethod = thrown(() => adapterOf([{ name: 'x' }]));
    expect(ConfigurationError.isInstance(noMethod)).toBe(true);
    expect(noMethod?.message).toMatch(/wrapIt takes framework tools; got object/);
    expect(thrown(() => checkToolInstance(null, SPEC))?.message).toMatch(/got null/);
    expect(() => checkToolInstance(new FrameworkTool('a', 'b'), SPEC)).not.toThrow();
  });

  test('the tools are named by their names: a policy for another name is refused', () => {
    const error = thrown(() =>
      createInstanceAdapter(
        [new FrameworkTool('send', 'S.')],
        {
          store: createMemoryStore(),
          conversationId: 'c',
          policies: { sned: {} },
        },
        SPEC,
      ),
    );
    expect(error?.message).toMatch(/"sned", but there is no such tool/);
  });
});

describe('wrapToolInstance: the same class, the presentation, the method replaced', () => {
  test('excluded: the tool itself; unsafe: a copy with the not-safe note, its method its own', () => {
    const [send, read, deploy] = tools() as [FrameworkTool, FrameworkTool, FrameworkTool];
    const adapter = adapterOf([send, read, deploy]);
    const call = () => 'wrapped';
    const spec = { caller: 'wrapIt', method: 'run', load };
    expect(wrapToolInstance(read, adapter, spec, call)).toBe(read);
    const unsafe = wrapToolInstance(deploy, adapter, spec, call);
    expect(unsafe).toBeInstanceOf(FrameworkTool);
    expect(Object.getPrototypeOf(unsafe)).toBe(deploy);
    expect(unsafe.description).toContain(RETRY_UNSAFE_NOTE);
    expect(unsafe.run({})).toBe('ran {}'); // the class's method: an unsafe tool runs as it is
    expect(isWrapped(unsafe)).toBe(true);
  });

  test('wrapped: the note, the repeat argument in the schema, the fields, the marked method; wrapping it again is refused', () => {
    const [send, read, deploy] = tools() as [FrameworkTool, FrameworkTool, FrameworkTool];
    const adapter = adapterOf([send, read, deploy]);
    const call = (input: unknown) => `wrapped ${JSON.stringify(input)}`;
    const spec = { caller: 'wrapIt', method: 'run', load, fields: { responseFormat: 'content' } };
    const wrapped = wrapToolInstance(send, adapter, spec, call);
    expect(wrapped).toBeInstanceOf(FrameworkTool);
    expect(wrapped.name).toBe('send');
    expect(wrapped.description).toMatch(/^Sends\./);
    expect(wrapped.description).toContain(RETRY_SAFE_NOTE);
    expect(wrapped.schema).toMatchObject({ properties: { to: {}, repeat: { type: 'integer' } } });
    expect(send.schema).not.toHaveProperty('properties.repeat'); // the original untouched
    expect(wrapped.responseFormat).toBe('content');
    expect(send.responseFormat).toBe('content_and_artifact');
    expect(wrapped.run({ to: 'ann' })).toBe('wrapped {"to":"ann"}');
    expect(isWrapped(wrapped.run)).toBe(true);
    const again = thrown(() =>
      wrapToolInstance(wrapped, adapterOf([wrapped, read, deploy]), spec, call),
    );
    expect(again?.message).toMatch(/already idempotent/);
  });

  test('presentSchema: a zod object extended with zod, a JSON schema as JSON; not repeatable: as it is', () => {
    const z = load('zod') as typeof import('zod');
    const zodTool = new FrameworkTool('send', 'Sends.', z.object({ to: z.string() }));
    const adapter = adapterOf([zodTool, ...tools().slice(1)]);
    const spec = { caller: 'wrapIt', method: 'run', load };
    const wrapped = wrapToolInstance(zodTool, adapter, spec, () => 'x');
    const schema = wrapped.schema as ReturnType<typeof z.object>;
    expect(schema.safeParse({ to: 'ann', repeat: 2 }).success).toBe(true);
    expect(schema.safeParse({ to: 'ann', repeat: 0 }).success).toBe(false);
    const json = { type: 'object', properties: {} };
    expect(presentSchema(presentTool(adapter, 'read', 'wrapIt'), json, load)).toBe(json);
  });
});

describe('wrapEachOnce / plainDefinition: the tools a middleware meets at run time', () => {
  test('each tool wrapped once, its name checked first', () => {
    let wraps = 0;
    const guarded = wrapEachOnce<{ name: string }>('middleware', (tool) => {
      wraps++;
      return { ...tool };
    });
    const tool = { name: 'send' };
    expect(guarded(tool)).toBe(guarded(tool));
    expect(wraps).toBe(1);
    expect(guarded({ name: 'send' })).not.toBe(guarded(tool)); // another tool object
    expect(thrown(() => guarded({ name: 'send it' }))?.message).toMatch(/no spaces/);
  });

  test("the defined fields, own or the prototype's, as a plain object", () => {
    const tool = Object.assign(Object.create(new FrameworkTool('send', 'Sends.')), {
      description: 'Sends. Safe to retry.',
      extras: undefined,
    });
    const plain = plainDefinition(tool, ['name', 'description', 'schema', 'extras']);
    expect(Object.getPrototypeOf(plain)).toBe(Object.prototype);
    expect(plain).toEqual({
      name: 'send',
      description: 'Sends. Safe to retry.',
      schema: { type: 'object', properties: { to: { type: 'string' } } },
    });
  });
});
