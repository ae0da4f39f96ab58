import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { runCall } from './pipeline.js';
import { runToolCall } from './tool-call.js';

type Info = { toolName: string; args: unknown; turn: string | undefined };
const adapterOf = () =>
  createAdapter<Info>({ store: createMemoryStore(), turnId: (call: Info) => call.turn } as never, {
    caller: 'runner',
    toolNames: ['charge'],
    howTo: 'turnId',
  });

describe('runToolCall: parse, identify, run, the outcome told apart', () => {
  it('runs once per turn, replays marked, hands back the tool output', async () => {
    const adapter = adapterOf();
    let runs = 0;
    const call = (turn: string) =>
      runToolCall(adapter, {
        toolName: 'charge',
        arguments: '{"amount":5}',
        info: (args) => ({ toolName: 'charge', args, turn }),
        execute: (args) => ({ charged: (args as { amount: number }).amount, run: ++runs }),
      });
    expect(await call('t-1')).toEqual({ output: { charged: 5, run: 1 } });
    expect(await call('t-1')).toEqual({ output: { charged: 5, run: 1, replayed: true } });
    expect(await call('t-2')).toEqual({ output: { charged: 5, run: 2 } });
  });

  it('bad input is the model text, a missing turn the developer error: nothing runs', async () => {
    const adapter = adapterOf();
    const execute = () => {
      throw new Error('must not run');
    };
    const bad = await runToolCall(adapter, {
      toolName: 'charge',
      arguments: '{not json',
      info: (args) => ({ toolName: 'charge', args, turn: 't-1' }),
      execute,
    });
    expect(JSON.parse((bad as { text: string }).text)).toMatchObject({ error: 'invalid_input' });
    const unknown = await runToolCall(adapter, {
      toolName: 'charge',
      arguments: {},
      info: (args) => ({ toolName: 'charge', args, turn: undefined }),
      execute,
    });
    expect(ConfigurationError.isInstance((unknown as { developer: unknown }).developer)).toBe(true);
  });

  it("the tool's own error comes back as error, and a retry runs again", async () => {
    const adapter = adapterOf();
    const boom = new Error('boom');
    const call = (execute: () => unknown) =>
      runToolCall(adapter, {
        toolName: 'charge',
        arguments: {},
        info: (args) => ({ toolName: 'charge', args, turn: 't-1' }),
        execute,
        mark: (value, replayed) => ({ value, replayed }),
      });
    expect(
      await call(() => {
        throw boom;
      }),
    ).toEqual({ error: boom });
    expect(await call(() => 'ok')).toEqual({ output: { value: 'ok', replayed: false } });
  });
});

describe('runCall keeps its outcome shapes', () => {
  it('NotAnOutcome value as output; the tool error with developer: false', async () => {
    const adapter = adapterOf() as never;
    const call = { toolName: 'charge', turnId: 't-1', args: {} };
    expect(
      await runCall(adapter, call, () => {
        throw new NotAnOutcome('waiting');
      }),
    ).toEqual({ output: 'waiting' });
    const boom = new Error('boom');
    expect(
      await runCall(adapter, call, () => {
        throw boom;
      }),
    ).toEqual({ error: boom, developer: false });
  });
});
