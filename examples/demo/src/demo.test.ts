import { expect, test } from 'vitest';
import { runDemo } from './demo.js';

test('the demo turn: a lost reply is replayed, a parallel duplicate runs once, drift is refused', async () => {
  const result = await runDemo();
  // Turn t-100: one charge of 1999 (the retry replayed), one of 500 (parallel pair); turn t-101: one more.
  expect(result.charges).toBe(3);
  expect(result.customers).toBe(1);
  expect(result.events.map((e) => e.outcome)).toEqual([
    'executed',
    'replayed',
    'executed',
    'waited',
    'executed',
    'drift',
    'executed',
  ]);
  const text = result.transcript.join('\n');
  expect(text).toMatch(/"replayed":true\}\s+\[call_a2\]/);
  expect(text).toMatch(/"error":"drift"/);
});
