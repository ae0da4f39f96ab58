import { describe, expect, test } from 'vitest';
import { createMemoryStore } from '../store/memory-store.js';
import {
  createToolListAdapter,
  createToolSetAdapter,
  oneToolOptions,
  wrapOneTool,
  wrapToolSet,
} from './tool-set.js';

const spec = {
  caller: 'idempotentTools',
  set: 'the tool set you pass to generateText: { name: tool({...}) }',
  tool: 'a tool object: define it with tool({ ... })',
  howTo: 'turnId',
  transcript: () => [{ role: 'user' as const, content: 'hi' }],
};
const options = { store: createMemoryStore(), conversationId: 'c' };

describe('createToolSetAdapter', () => {
  test('the record and each tool are checked; tools without execute need no identity', () => {
    const make =
      (tools: unknown, more: Record<string, unknown> = {}) =>
      () =>
        createToolSetAdapter(tools, { ...options, ...more }, { ...spec, isTool: (t) => 'x' in t });
    expect(make([])).toThrow(
      'idempotentTools: pass the tool set you pass to generateText: { name: tool({...}) }.',
    );
    expect(make({ a: { execute: 1 } })).toThrow(/"a" is not a tool object/);
    expect(make({ a: { x: 1, execute: 1 } })).toThrow(
      'idempotentTools: tool "a" has an execute that is not a function.',
    );
    const { entries } = make({ a: { x: 1, execute: () => 1 }, web: { x: 1 } }, {})();
    expect(entries.map(([name]) => name)).toEqual(['a', 'web']);
    // `web` has no execute: it may be excluded, and is no tool that needs a turn.
    expect(make({ web: { x: 1 } }, { conversationId: undefined, exclude: ['web'] })).not.toThrow();
    expect(make({ a: { x: 1, execute: () => 1 } }, { conversationId: undefined })).toThrow(
      /nothing tells one conversation from another, so a would replay/,
    );
  });
});

describe('wrapToolSet, wrapOneTool', () => {
  type Tool = { execute?: () => unknown; wrapped?: string };
  const wrapSet = (tools: unknown, given: unknown, caller: string) =>
    wrapToolSet<never, Tool>(tools, given, { ...spec, caller }, (adapter) => (name, tool) => {
      if (tool.execute === undefined || adapter.treatment(name) !== 'wrap') return tool;
      return { ...tool, wrapped: name };
    });
  test('each entry wrapped by the adapter of the set; the others as they are', () => {
    const web = {};
    const set = wrapSet(
      { a: { execute: () => 1 }, b: { execute: () => 2 }, web },
      {
        ...options,
        exclude: ['b'],
      },
      'idempotentTools',
    );
    expect(set.a?.wrapped).toBe('a');
    expect(set.b?.wrapped).toBeUndefined();
    expect(set.web).toBe(web);
    expect(() => wrapSet([], options, 'idempotentTools')).toThrow(/pass the tool set/);
  });
  test('one tool: its name checked, its options as the set of it', () => {
    const one = wrapOneTool<Tool>('a', { execute: () => 1 }, options, 'idempotentTool', wrapSet);
    expect(one.wrapped).toBe('a');
    const unsafe = { ...options, unsafe: true };
    expect(wrapOneTool<Tool>('a', { execute: () => 1 }, unsafe, 'x', wrapSet).wrapped).toBe(
      undefined,
    );
    expect(() => wrapOneTool('a b', {}, options, 'idempotentTool', wrapSet)).toThrow(
      expect.objectContaining({ code: 'configuration' }),
    );
  });
});

describe('oneToolOptions', () => {
  test('policy and unsafe become the set options of that one tool', () => {
    expect(oneToolOptions('a', { store: 1, policy: { ttl: 5 }, unsafe: true })).toEqual({
      store: 1,
      policies: { a: { ttl: 5 } },
      unsafe: ['a'],
    });
    expect(oneToolOptions('a', { unsafe: false })).toEqual({});
  });
});

describe('createToolListAdapter', () => {
  const listSpec = {
    caller: 'toolRunner',
    list: 'params.tools must be an array',
    transcript: spec.transcript,
    isTool: (t: object): t is { name: string; run: unknown } => 'run' in t && 'name' in t,
    howTo: 'turnId',
  };
  test('the list is checked; only the tools it wraps are policed, others may be named', () => {
    expect(() => createToolListAdapter({}, options, listSpec)).toThrow(
      'toolRunner: params.tools must be an array.',
    );
    const tools = [{ name: 'charge', run: () => 1 }, { name: 'web_search' }, { type: 'x' }];
    const adapter = createToolListAdapter(tools, { ...options, exclude: ['web_search'] }, listSpec);
    expect(adapter.treatment('charge')).toBe('wrap');
    expect(() => createToolListAdapter(tools, { ...options, unsafe: ['nope'] }, listSpec)).toThrow(
      /nope/,
    );
  });
});
