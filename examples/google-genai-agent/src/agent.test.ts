import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { main, problems } from './agent.js';

const saved = process.env.GEMINI_API_KEY;
beforeEach(() => {
  delete process.env.GEMINI_API_KEY;
});
afterEach(() => {
  if (saved !== undefined) process.env.GEMINI_API_KEY = saved;
});

const run = () => main({ dataDir: mkdtempSync(join(tmpdir(), 'google-genai-agent-')) });

test('offline: a cut reply, a broken stream, a dropped connection, duplicates in one step, a new turn', async () => {
  const result = await run();
  // Ann's two turns (the same words): two tickets; Bob (the same words, his own chat): one; Cy: one.
  expect(result.ticketsBy).toEqual({ ann: 2, bob: 1, cy: 1 });
  expect(problems(result)).toEqual([]); // what npm start checks
  // Each of the three retried turns: the duplicate in the first step, then both calls again.
  expect(result.replayed).toBe(9);
  const text = result.transcript.join('\n');
  expect(text).toContain('the stream broke -> the app sends the turn again (attempt 2)');
  expect(text).toMatch(/tool -> \{"ticket":"T-3",.*"replayed":true\}/);
  expect(text).toContain('side effect: ticket T-2 opened for ann');
});

test('the transcript is the same, line for line, on every run', async () => {
  const first = (await run()).transcript;
  const second = (await run()).transcript;
  expect(second).toEqual(first);
  expect(first.filter((line) => line.includes('side effect'))).toEqual([
    '    side effect: ticket T-1 opened for ann',
    '    side effect: ticket T-2 opened for ann',
    '    side effect: ticket T-3 opened for bob',
    '    side effect: ticket T-4 opened for cy',
  ]);
});

test("npm start's check fails on a ticket opened twice, missing, or for someone else", () => {
  expect(problems({ ticketsBy: { ann: 2, bob: 1, cy: 1 } })).toEqual([]);
  expect(problems({ ticketsBy: { ann: 1, bob: 2, cy: 1, eve: 1 } })).toEqual([
    'tickets for ann: 1, expected 2',
    'tickets for bob: 2, expected 1',
    'tickets for eve: 1, expected 0',
  ]);
});
