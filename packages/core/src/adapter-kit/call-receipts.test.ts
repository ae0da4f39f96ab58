import { describe, expect, test } from 'vitest';
import { ConfigurationError, DriftError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { runWithReceipt } from './call-receipts.js';
import { orThrow } from './pipeline.js';

type Info = { chat: string | undefined; args: unknown };

function adapter() {
  return createAdapter<Info>(
    {
      store: createMemoryStore(),
      conversationId: (info) => info.chat,
      policies: { upsert: { businessKey: (args: unknown) => (args as { email: string }).email } },
    },
    {
      caller: 'test',
      toolNames: ['send', 'upsert'],
      howTo: 'conversationId',
      transcript: () => [{ role: 'user', content: 'Send it.' }],
    },
  );
}

const given = (toolName: string, input: unknown, chat: string | null = 'chat-1') => ({
  toolName,
  input,
  parsed: true,
  info: (args: unknown) => ({ chat: chat ?? undefined, args }),
});

describe('runWithReceipt: the outcome with what code reads of it', () => {
  test('a fresh run: the stored value, its receipt, and what the tool returned before the round trip', async () => {
    const a = adapter();
    const returned = { at: new Date(0), n: 1 };
    const first = await runWithReceipt(a, given('send', { to: 'ann' }), async () => returned);
    expect(first).toMatchObject({
      output: { at: '1970-01-01T00:00:00.000Z', n: 1 },
      receipt: { key: expect.stringMatching(/^v1_/), replayed: false, outcome: 'executed' },
    });
    expect('fresh' in first && first.fresh?.value).toBe(returned);

    const again = await runWithReceipt(a, given('send', { to: 'ann' }), async () => {
      throw new Error('must not run');
    });
    expect(again).toEqual({
      output: { at: '1970-01-01T00:00:00.000Z', n: 1 },
      receipt: {
        key: 'receipt' in first ? first.receipt.key : '',
        replayed: true,
        outcome: 'replayed',
      },
    });
  });

  test("the model's error: its text, a receipt with the error's code and key, the error as cause", async () => {
    const a = adapter();
    await runWithReceipt(a, given('upsert', { email: 'a@x', name: 'A' }), async () => 'ok');
    const drift = await runWithReceipt(a, given('upsert', { email: 'a@x', name: 'B' }), () => 'no');
    expect(drift).toMatchObject({
      text: expect.stringContaining('"error":"drift"'),
      receipt: {
        key: expect.stringMatching(/^v1_/),
        replayed: false,
        outcome: 'error',
        error: 'drift',
      },
    });
    expect(() => orThrow(drift as never)).toThrow(DriftError);
  });

  test('arguments that are not JSON: invalid_input, no key; no identity: a developer error', async () => {
    const a = adapter();
    const bad = await runWithReceipt(a, given('send', { n: 10n }), () => 'no');
    expect(bad).toMatchObject({
      receipt: { key: undefined, outcome: 'error', error: 'invalid_input' },
    });
    const text = { ...given('send', '{nope'), parsed: false };
    const unparsed = await runWithReceipt(a, text, () => 'no');
    expect(unparsed).toMatchObject({
      text: expect.stringMatching(/not valid JSON/),
      receipt: { key: undefined, replayed: false, outcome: 'error', error: 'invalid_input' },
      cause: undefined,
    });
    const lost = await runWithReceipt(a, given('send', {}, null), () => 'no');
    expect('developer' in lost && ConfigurationError.isInstance(lost.developer)).toBe(true);
  });

  test("the tool's own error as it is; a NotAnOutcome's value is the output, fresh, not stored", async () => {
    const a = adapter();
    const own = new Error('card declined');
    expect(await runWithReceipt(a, given('send', { to: 'bo' }), () => Promise.reject(own))).toEqual(
      {
        error: own,
      },
    );
    const passed = { isError: true };
    const out = await runWithReceipt(a, given('send', { to: 'cy' }), () => {
      throw new NotAnOutcome(passed);
    });
    expect(out).toMatchObject({
      output: passed,
      fresh: { value: passed },
      receipt: { key: expect.stringMatching(/^v1_/), replayed: false, outcome: 'executed' },
    });
    let runs = 0;
    await runWithReceipt(a, given('send', { to: 'cy' }), () => ++runs);
    expect(runs).toBe(1); // not stored: the retry ran
  });
});
