import { describe, expect, test } from 'vitest';
import { ConfigurationError, DriftError, InvalidInputError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import {
  orThrow,
  prepareCall,
  runPipeline,
  runPrepared,
  settleCall,
  settleRun,
} from './pipeline.js';

type Info = { chat?: string; args: unknown };

function adapter(conversationId?: string) {
  return createAdapter<Info>(
    {
      store: createMemoryStore(),
      conversationId: (info) => info.chat ?? conversationId,
      policies: { send: { repeatable: true } },
    },
    {
      caller: 'test',
      toolNames: ['send', 'charge'],
      repeatable: true,
      howTo: 'conversationId',
      transcript: () => [{ role: 'user', content: 'Send it.' }],
    },
  );
}

describe('prepareCall / runPrepared: one pipeline, one outcome', () => {
  test('bad arguments: the model text, nothing prepared; no identity: a developer error', async () => {
    const a = adapter();
    const bad = await prepareCall(a, {
      toolName: 'charge',
      input: '{nope',
      info: (args) => ({ args }),
    });
    expect(bad).toMatchObject({ text: expect.stringMatching(/not valid JSON/) });
    const unknown = await prepareCall(a, {
      toolName: 'charge',
      input: {},
      info: (args) => ({ args }),
    });
    expect('developer' in unknown && ConfigurationError.isInstance(unknown.developer)).toBe(true);
  });

  test('the repeat argument: out of the tool args, into the key from 2 up; a retry of repeat 2 replays it', async () => {
    const a = adapter('chat-1');
    const sent: unknown[] = [];
    const send = (input: unknown) =>
      runPipeline(a, { toolName: 'send', input, info: (args) => ({ args }) }, async (args) => {
        sent.push(args);
        return { n: sent.length };
      });
    expect(await send({ to: 'ann' })).toEqual({ output: { n: 1 } });
    expect(await send({ to: 'ann', repeat: 1 })).toEqual({ output: { n: 1, replayed: true } });
    expect(await send({ to: 'ann', repeat: 2 })).toEqual({ output: { n: 2 } });
    expect(await send({ to: 'ann', repeat: 2 })).toEqual({ output: { n: 2, replayed: true } });
    expect(sent).toEqual([{ to: 'ann' }, { to: 'ann' }]);
    expect(await send({ to: 'ann', repeat: 'twice' })).toMatchObject({
      text: expect.stringMatching(/whole number/),
    });
  });

  test("runPrepared: the tool's own error apart from the model's text", async () => {
    const a = adapter('chat-1');
    const prepared = await prepareCall(a, {
      toolName: 'charge',
      input: { amount: 5 },
      info: (args) => ({ args }),
    });
    if (!('prepared' in prepared)) throw new Error('not prepared');
    expect(prepared.prepared.args).toEqual({ amount: 5 });
    const boom = new Error('card declined');
    expect(
      await runPrepared(a, prepared.prepared, () => {
        throw boom;
      }),
    ).toEqual({ error: boom });
  });

  test("parsed: the framework's own value as the args (no JSON round trip); the repeat still taken out", async () => {
    const a = adapter('chat-1');
    const when = new Date(0);
    const info = (args: unknown) => ({ args });
    const plain = await prepareCall(a, { toolName: 'charge', input: { when }, parsed: true, info });
    if (!('prepared' in plain)) throw new Error('not prepared');
    expect((plain.prepared.args as { when: unknown }).when).toBe(when);
    const input = { to: 'ann', repeat: 2 };
    const repeated = await prepareCall(a, { toolName: 'send', input, parsed: true, info });
    expect(repeated).toMatchObject({ prepared: { args: { to: 'ann' }, repeat: 2 } });
    const bad = { to: 'ann', repeat: 0 };
    expect(await prepareCall(a, { toolName: 'send', input: bad, parsed: true, info })).toEqual({
      text: expect.stringMatching(/whole number/),
    });
  });

  test('settleRun: a run of its own told apart; the model text keeps its error, settleCall drops it', async () => {
    const a = adapter('chat-1');
    const drift = new DriftError({
      key: 'k',
      toolName: 'charge',
      storedFingerprint: 'a',
      fingerprint: 'b',
      message: 'Other arguments.',
    });
    const settled = await settleRun(a, () => Promise.reject(drift));
    expect(settled).toEqual({ text: expect.stringMatching(/"drift"/), cause: drift });
    expect(await settleRun(a, async () => ({ value: { n: 1 }, replayed: true }))).toEqual({
      output: { n: 1, replayed: true },
    });
    const config = new ConfigurationError({ option: 'x', message: 'Fix x.' });
    expect(await settleRun(a, () => Promise.reject(config))).toEqual({ developer: config });
    const call = { toolName: 'charge', turnId: 't', args: {} };
    const told = await settleCall(a, call, () => {
      throw drift;
    });
    expect(told).toEqual({ text: expect.stringMatching(/"drift"/) });
  });

  test("the call's own policy, given the resolved turn, is the key's and the run's", async () => {
    const a = adapter('chat-1');
    const turns: unknown[] = [];
    const input = (args: { amount: number; key: string }) => ({
      toolName: 'charge',
      input: args,
      info: (parsed: unknown) => ({ args: parsed }),
      policy: (_info: Info, turn: unknown) => {
        turns.push(turn);
        return { businessKey: (given: unknown) => (given as { key: string }).key };
      },
    });
    let runs = 0;
    const execute = () => ({ n: ++runs });
    expect(await runPipeline(a, input({ amount: 5, key: 'k1' }), execute)).toEqual({
      output: { n: 1 },
    });
    // The business key is the call's identity: the same key with other args is drift.
    const drift = await runPipeline(a, input({ amount: 6, key: 'k1' }), execute);
    expect(drift).toMatchObject({ text: expect.stringMatching(/"drift"/) });
    const prepared = await prepareCall(a, input({ amount: 7, key: 'k2' }));
    expect(prepared).toMatchObject({ prepared: { policy: { businessKey: expect.any(Function) } } });
    expect(turns[0]).toMatchObject({ source: 'derived' });
    expect(runs).toBe(1);
  });
});

describe('prepareCall: turnOf; orThrow for frameworks that throw every error', () => {
  test('turnOf: the key is made of its turn id; a refusal in it is the developer error, nothing ran', async () => {
    const a = adapter('chat-1');
    const input = { toolName: 'charge', input: {}, info: (args: unknown) => ({ args }) };
    const plain = orThrow(await prepareCall(a, input));
    const placed = orThrow(
      await prepareCall(a, { ...input, turnOf: (turn) => `${turn?.turnId}/step-2` }),
    );
    expect(placed.call.turnId).toBe(`${plain.call.turnId}/step-2`);
    const refusal = new ConfigurationError({ option: 'turnId', message: 'the run finished' });
    const refused = await prepareCall(a, {
      ...input,
      turnOf: async () => {
        throw refusal;
      },
    });
    expect(refused).toEqual({ developer: refusal });
  });

  test("prepareCall's model text keeps its error (runPipeline's drops it); orThrow throws what did not run", async () => {
    const a = createAdapter<Info>(
      { store: createMemoryStore(), turnId: 't', maxArgsBytes: 20 },
      { caller: 'test', toolNames: ['charge'], howTo: 'turnId' },
    );
    const input = {
      toolName: 'charge',
      input: { note: 'x'.repeat(50) },
      info: (args: unknown) => ({ args }),
    };
    const big = await prepareCall(a, input);
    expect(big).toMatchObject({ text: expect.stringMatching(/invalid_input/) });
    expect(() => orThrow(big)).toThrow(InvalidInputError);
    expect(await runPipeline(a, input, () => 'ok')).toEqual({ text: expect.any(String) });
    expect(() => orThrow({ text: 'bad' })).toThrow(InvalidInputError);
    const boom = new Error('boom');
    expect(() => orThrow({ error: boom })).toThrow(boom);
    const config = new ConfigurationError({ option: 'x', message: 'Fix x.' });
    expect(() => orThrow({ developer: config })).toThrow(config);
    expect(orThrow({ output: 1 })).toBe(1);
  });
});
