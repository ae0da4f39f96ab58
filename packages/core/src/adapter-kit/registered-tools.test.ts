import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { isWrapped } from '../executor/wrapped.js';
import { RETRY_SAFE_NOTE, RETRY_UNSAFE_NOTE } from '../model-output.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { type EntrySpec, type ToolEntry, wrapEntry, wrapRegistry } from './registered-tools.js';

type Entry = ToolEntry & { handler?: unknown; inputSchema?: unknown };
const adapter = createAdapter<never>(
  {
    store: createMemoryStore(),
    turnId: 't',
    exclude: ['read'],
    unsafe: ['deploy'],
    policies: { signup: { businessKey: (args: { email: string }) => args.email } },
  } as never,
  { caller: 'test', howTo: 'turnId' },
);
const entry = (own: Partial<Entry> = {}): Entry => {
  const tool: Entry = {
    handler: () => 'own',
    description: 'Does it.',
    inputSchema: { type: 'object' },
    update(updates) {
      if (updates.callback !== undefined) tool.handler = updates.callback;
      if (updates.paramsSchema !== undefined) tool.inputSchema = updates.paramsSchema;
      if (updates.description !== undefined) tool.description = updates.description as string;
    },
    ...own,
  };
  return tool;
};
const spec = (changed: string[] = []): EntrySpec<Entry> => ({
  adapter,
  caller: 'test',
  field: 'handler',
  schemaUpdate: 'paramsSchema',
  callbacks: (tool) => [tool.handler],
  wrapped: (own) => () => `wrapped ${(own.handler as () => string)()} as ${own.name}`,
  wrapReadOnly: false,
  asks: (name) => name === 'audit',
  schema: (_present, own) => ({ ...(own as object), presented: true }),
  changed: (name) => changed.push(name),
});
const call = (tool: Entry) => (tool.handler as () => unknown)();

describe('wrapEntry', () => {
  test('a wrapped tool: the presented schema, the note, the wrapper; updated, wrapped again', () => {
    const changed: string[] = [];
    const tool = entry();
    wrapEntry('send', tool, spec(changed));
    expect(call(tool)).toBe('wrapped own as send');
    expect(tool.inputSchema).toEqual({ type: 'object', presented: true });
    expect(tool.description).toContain(RETRY_SAFE_NOTE);
    expect(tool.annotations).toBeUndefined();
    tool.update({ callback: () => 'new', name: 'post', description: 'Posts.' });
    expect(call(tool)).toBe('wrapped new as post');
    expect(tool.description).toMatch(/^Posts\./);
    expect(tool.description).toContain(RETRY_SAFE_NOTE);
    expect(changed).toEqual(['send', 'post']);
  });

  test('unsafe: the other note and idempotentHint false; a business key: true; own hints kept', () => {
    const deploy = entry();
    wrapEntry('deploy', deploy, spec());
    expect(call(deploy)).toBe('own');
    expect(deploy.description).toContain(RETRY_UNSAFE_NOTE);
    expect(deploy.annotations).toEqual({ idempotentHint: false });
    const signup = entry();
    wrapEntry('signup', signup, spec());
    expect(signup.annotations).toEqual({ idempotentHint: true });
    const own = entry({ annotations: { idempotentHint: false } });
    wrapEntry('signup', own, spec());
    expect(own.annotations).toEqual({ idempotentHint: false });
  });

  test('excluded and read-only tools stay as they are, unless a read-only one asks first', () => {
    const read = entry();
    wrapEntry('read', read, spec());
    expect([call(read), read.description, read.inputSchema]).toEqual([
      'own',
      'Does it.',
      { type: 'object' },
    ]);
    const look = entry({ annotations: { readOnlyHint: true } });
    wrapEntry('look', look, spec());
    expect(call(look)).toBe('own');
    const audit = entry({ annotations: { readOnlyHint: true } });
    wrapEntry('audit', audit, spec());
    expect(call(audit)).toBe('wrapped own as audit');
    const all = entry({ annotations: { readOnlyHint: true } });
    wrapEntry('look', all, { ...spec(), wrapReadOnly: true });
    expect(call(all)).toBe('wrapped own as look');
  });
});

describe('wrapRegistry', () => {
  test('tools registered already and later are wrapped; a tool another wrapper made is refused', () => {
    const tools: Record<string, Entry> = { send: entry() };
    const server = {
      registerTool(name: string) {
        tools[name] = entry();
        return tools[name];
      },
    };
    const wrap = (name: unknown, tool: Entry) => wrapEntry(name as string, tool, spec());
    const spec2 = {
      caller: 'test',
      methods: ['registerTool', 'tool'],
      registered: Object.entries(tools),
      callbacks: (tool: Entry) => [tool.handler],
    };
    expect(wrapRegistry(server, spec2, wrap)).toBe(server);
    expect(isWrapped(server)).toBe(true);
    expect(call(tools.send as Entry)).toBe('wrapped own as send');
    server.registerTool('post');
    expect(call(tools.post as Entry)).toBe('wrapped own as post');
    const again = { registerTool: server.registerTool };
    expect(() =>
      wrapRegistry(again, { ...spec2, registered: Object.entries(tools) }, wrap),
    ).toThrow(ConfigurationError);
  });
});
