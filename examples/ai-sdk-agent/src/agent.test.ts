import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main, problems } from './agent.js';

test('offline: retries replay, each effect runs once, and the second user gets their own charge', async () => {
  const previous = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'ai-sdk-agent-')) });
    // Ada is charged once (retry, restart), Bob once: the same words, another chat.
    expect(result.charges).toEqual({ Ada: 1, Bob: 1 });
    expect(result.receipts).toBe(2);
    expect(problems(result)).toEqual([]); // what npm start checks
    expect(result.sideEffects).toBe(4);
    // Ada's retry in step 3, her parallel receipt, and the restarted server's charge.
    expect(result.replayed).toBe(3);
    const text = result.transcript.join('\n');
    expect(text).toMatch(/"replayed":true\}\s+\[call_3\]/);
    // Bob's charge is fresh: ch_0002, not Ada's ch_0001 replayed.
    const bob = text.slice(text.indexOf('3. Bob'));
    expect(bob).toContain('"chargeId":"ch_0002"');
    expect(bob).not.toContain('"replayed":true');
  } finally {
    if (previous !== undefined) process.env.OPENAI_API_KEY = previous;
  }
});

test("npm start's check fails on an effect that ran twice, went missing or went to another user", () => {
  const ok = {
    charges: { Ada: 1, Bob: 1 },
    receiptsTo: { 'ada@example.com': 1, 'bob@example.com': 1 },
  };
  expect(problems(ok)).toEqual([]);
  // Bob's chat handed Ada's charge, replayed: Bob has none (and no receipt).
  expect(problems({ charges: { Ada: 1 }, receiptsTo: { 'ada@example.com': 1 } })).toEqual([
    "charge for Bob is missing (or was replayed from another user's)",
    "receipt for bob@example.com is missing (or was replayed from another user's)",
  ]);
  expect(problems({ ...ok, charges: { Ada: 2, Bob: 1 } })).toEqual([
    'charge for Ada: 2, expected 1',
  ]);
  expect(problems({ ...ok, receiptsTo: { ...ok.receiptsTo, 'eve@example.com': 1 } })).toEqual([
    'receipt for eve@example.com: 1, expected 0',
  ]);
});
