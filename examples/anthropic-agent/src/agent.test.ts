import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { main, problems } from './agent.js';

const saved = process.env.ANTHROPIC_API_KEY;
beforeEach(() => {
  delete process.env.ANTHROPIC_API_KEY;
});
afterEach(() => {
  if (saved !== undefined) process.env.ANTHROPIC_API_KEY = saved;
});

const run = () => main({ dataDir: mkdtempSync(join(tmpdir(), 'anthropic-agent-')) });

test('offline: a duplicate in one step, a broken stream retried, a new turn, another chat', async () => {
  const result = await run();
  expect(result.ticketsBy).toEqual({ 'ann#1': 1, 'ann#2': 1, 'bob#1': 1 });
  expect(problems(result)).toEqual([]);
  const text = result.transcript.join('\n');
  expect(text).toContain('attempt 1: the reply was lost after the tool ran');
  // The retried turn: both calls replayed; the new turn and Bob: one of two replayed.
  expect(text).toContain('  attempt 2: 2 create_ticket call(s), 2 replayed');
  expect(text).toContain('  attempt 1: 2 create_ticket call(s), 1 replayed');
  expect(text).toContain('Tickets: T-1 for ann#1, T-2 for ann#2, T-3 for bob#1');
});

test('the transcript is the same, line for line, on every run', async () => {
  expect((await run()).transcript).toEqual((await run()).transcript);
});

test("npm start's check fails on a ticket opened twice or missing", () => {
  expect(problems({ ticketsBy: { 'ann#1': 2, 'bob#1': 1 } })).toEqual([
    'tickets for ann#1: 2, expected 1',
    'tickets for ann#2: 0, expected 1',
  ]);
});
