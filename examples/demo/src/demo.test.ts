import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { runDemo } from './demo.js';

test('the demo turn: a lost reply is replayed, a parallel duplicate runs once, drift is refused', async () => {
  const result = await runDemo({ dir: mkdtempSync(join(tmpdir(), 'demo-')) });
  // t-100: one charge of 1999 (the retry replayed), one of 500 (parallel pair); t-101, Bob's own
  // turn with the same arguments, and t-102 (the killed process, whose outcome the retry replays
  // from SQLite): one each.
  expect(result.charges).toBe(5);
  expect(result.customers).toBe(1);
  expect(result.events.map((e) => e.outcome)).toEqual([
    'executed',
    'replayed',
    'executed',
    'waited',
    'executed',
    'drift',
    'executed',
    'executed',
    'replayed',
  ]);
  const text = result.transcript.join('\n');
  expect(text).toMatch(/"replayed":true\}\s+\[call_a2\]/);
  expect(text).toMatch(/"error":"drift"/);
  expect(text).toMatch(/"id":"ch_0004".*\[call_g1\]/); // Bob's own charge, not a replay
  expect(text).toMatch(/died by SIGKILL/);
  expect(text).toMatch(/"replayed":true\}\s+\[call_f1\]/);
});
