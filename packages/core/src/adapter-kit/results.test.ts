import { describe, expect, it } from 'vitest';
import { createMemoryStore } from '../store/memory-store.js';
import { createDispatcher } from './dispatch-calls.js';
import {
  boxedOutputs,
  boxOutput,
  markToolResult,
  toolResultContent,
  toolResultOf,
  unboxOutput,
} from './results.js';

describe('markToolResult: the mark keeps the shape of the result', () => {
  it('text stays text, blocks stay blocks, other values get the field', () => {
    expect(markToolResult('{"id":"T-1"}', true, false)).toBe('{"id":"T-1","replayed":true}');
    expect(markToolResult('done', true, false)).toBe('done\n\n{"replayed":true}');
    expect(markToolResult([{ type: 'text', text: 'a' }], true, false)).toEqual([
      { type: 'text', text: 'a\n\n{"replayed":true}' },
    ]);
    expect(markToolResult({ id: 1 }, false, true)).toEqual({ id: 1, replayed: false });
  });

  it('a fresh result is left as it is unless markFresh', () => {
    const value = { id: 1 };
    expect(markToolResult(value, false, false)).toBe(value);
    expect(markToolResult('done', false, true)).toBe('done\n\n{"replayed":false}');
  });
});

describe('toolResultContent', () => {
  it('text and blocks as they are, anything else as JSON text', () => {
    const blocks = [{ type: 'text', text: 'a' }];
    expect(toolResultContent('a')).toBe('a');
    expect(toolResultContent(blocks)).toBe(blocks);
    expect(toolResultContent({ id: 1 })).toBe('{"id":1}');
    expect(toolResultContent([])).toBe('[]');
    expect(toolResultContent(undefined)).toBe('null');
  });
});

describe('boxOutput / unboxOutput', () => {
  it("tells a tool's own text apart from an error text", () => {
    expect(unboxOutput(boxOutput('{"error":"x"}'))).toEqual({ value: '{"error":"x"}' });
    expect(unboxOutput(boxOutput(undefined))).toEqual({ value: undefined });
    expect(unboxOutput('{"error":"x"}')).toBeUndefined();
    expect(unboxOutput({ value: 1 })).toBeUndefined();
    expect(unboxOutput(null)).toBeUndefined();
  });

  it('boxedOutputs: wrapped and unwrapped outputs boxed, error texts not', async () => {
    const dispatcher = createDispatcher(
      { charge: () => 'charged', ping: () => 'pong' },
      { store: createMemoryStore(), unsafe: ['ping'], turnId: 't-1' },
      { caller: 'test', howTo: 'turnId' },
    );
    const outcomes = await dispatcher.run(
      [
        { name: 'charge', arguments: '{}' },
        { name: 'ping', arguments: '{}' },
        { name: 'nope', arguments: '{}' },
      ],
      {
        ...boxedOutputs(dispatcher, (value, replayed) => `${value} ${replayed}`),
        info: (toolName, args) => ({ toolName, args, request: {} }),
      },
    );
    const own = outcomes.map((o) => ('output' in o ? unboxOutput(o.output) : o));
    expect(own).toEqual([{ value: 'charged false' }, { value: 'pong' }, undefined]);
    const unknownTool = outcomes[2] as { output: string };
    expect(JSON.parse(unknownTool.output)).toMatchObject({ error: 'invalid_input' });
    expect(unknownTool.output).toContain('no tool named');
  });
});

describe('toolResultOf', () => {
  it("the tool's output as content; error texts and the tool's errors as error results", () => {
    const errorContent = (error: unknown) => `Error: ${(error as Error).message}`;
    expect(toolResultOf({ output: boxOutput({ id: 1 }) }, errorContent)).toEqual({
      content: '{"id":1}',
      isError: false,
    });
    expect(toolResultOf({ output: boxOutput('{"error":"x"}') }, errorContent)).toEqual({
      content: '{"error":"x"}',
      isError: false,
    });
    expect(toolResultOf({ output: '{"error":"x"}' }, errorContent)).toEqual({
      content: '{"error":"x"}',
      isError: true,
    });
    const failed = { error: new Error('boom'), call: {} };
    expect(toolResultOf(failed, errorContent)).toEqual({ content: 'Error: boom', isError: true });
  });
});
