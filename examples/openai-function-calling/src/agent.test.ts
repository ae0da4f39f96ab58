import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { main, problems } from './agent.js';

const saved = process.env.OPENAI_API_KEY;
beforeEach(() => {
  delete process.env.OPENAI_API_KEY;
});
afterEach(() => {
  if (saved !== undefined) process.env.OPENAI_API_KEY = saved;
});

const run = () => main({ dataDir: mkdtempSync(join(tmpdir(), 'openai-function-calling-')) });

test('offline: dropped and cut replies, a parallel duplicate, retried turns, two users with the same words', async () => {
  const result = await run();
  // Ann and Bob sent the same words in their own chats: one ticket each; Cy's VPN: one.
  expect(result.users).toEqual(['ann', 'bob', 'cy']);
  expect(result.duplicates).toBe(0);
  expect(problems(result)).toEqual([]); // what npm start checks
  // Ann: the parallel duplicate, then both calls of the retried turn; Bob: his parallel
  // duplicate (his first call ran, it was not Ann's replayed); Cy: the retried run.
  expect(result.replayed).toBe(5);
  expect(result.transcript.join('\n')).toMatch(/tool -> \{.*"replayed":true\}/);
});

test('offline: a repeatable tool, retried and repeated on purpose (repeat: 2)', async () => {
  const result = await run();
  // Dan's model: the reminder, its retry (replayed), repeat: 2 (sent), its retry (replayed).
  expect(result.reminders).toBe(2);
  expect(result.remindersReplayed).toBe(2);
  expect(problems(result)).toEqual([]);
  const transcript = result.transcript.join('\n');
  // The model was told how to repeat on purpose, and asked for it with `repeat: 2`.
  expect(transcript).toContain('To do it again on purpose, pass repeat: 2 (3, ...).');
  expect(transcript).toContain('send_reminder({"to":"eve","about":"the 3pm review","repeat":2})');
  expect(transcript.match(/side effect: reminder \d sent to eve/g)).toEqual([
    'side effect: reminder 1 sent to eve',
    'side effect: reminder 2 sent to eve',
  ]);
});

/**
 * The transcript with the data folder and the call ids (random, from the scripted server)
 * normalised: each id becomes call_<n>, n its order of first appearance, so the test still sees
 * which line names which call.
 */
function normalised(transcript: string[], dataDir: RegExp): string {
  const ids = new Map<string, string>();
  return transcript
    .join('\n')
    .replace(dataDir, '<data>')
    .replace(/call_[0-9a-f]{8}/g, (id) => {
      if (!ids.has(id)) ids.set(id, `call_${ids.size + 1}`);
      return ids.get(id) as string;
    });
}

test('the transcript is the same, line for line, on every run', async () => {
  const dataDir = /Store: SQLite .*openai-function-calling\.db/;
  const first = normalised((await run()).transcript, dataDir);
  const second = normalised((await run()).transcript, dataDir);
  expect(second).toBe(first);
  // Each part in its fixed order: the calls, the side effect, then the results in call order.
  expect(first).toContain(
    [
      '  model: create_ticket({"title":"The printer on floor 3 is on fire","priority":"high"}) [call_1]',
      '  model: create_ticket({"title":"The printer on floor 3 is on fire","priority":"high"}) [call_2]',
      '    side effect: ticket T-1 opened for ann',
      '  tool -> {"ticket":"T-1","title":"The printer on floor 3 is on fire","priority":"high"} [call_1]',
      '  tool -> {"ticket":"T-1","title":"The printer on floor 3 is on fire","priority":"high","replayed":true} [call_2]',
    ].join('\n'),
  );
  expect(first).toContain(
    [
      '  model: create_ticket({"title":"The VPN drops every five minutes","priority":"high"}) [call_7]',
      '    side effect: ticket T-3 opened for cy',
      '  tool -> {"ticket":"T-3","title":"The VPN drops every five minutes","priority":"high"} [call_7]',
      '  network: terminated (other side closed) -> the app runs the agent again (attempt 2)',
    ].join('\n'),
  );
  expect(first).toContain(
    [
      '  model: send_reminder({"to":"eve","about":"the 3pm review"}) [call_9]',
      '    side effect: reminder 1 sent to eve (from dan)',
      '  tool -> {"reminder":1,"to":"eve"} [call_9]',
      '  model: send_reminder({"to":"eve","about":"the 3pm review"}) [call_10]',
      '  tool -> {"reminder":1,"to":"eve","replayed":true} [call_10]',
      '  model: send_reminder({"to":"eve","about":"the 3pm review","repeat":2}) [call_11]',
      '    side effect: reminder 2 sent to eve (from dan)',
      '  tool -> {"reminder":2,"to":"eve"} [call_11]',
      '  model: send_reminder({"to":"eve","about":"the 3pm review","repeat":2}) [call_12]',
      '  tool -> {"reminder":2,"to":"eve","replayed":true} [call_12]',
    ].join('\n'),
  );
});

test("npm start's check fails on a ticket opened twice, missing, or for someone else", () => {
  expect(problems({ ticketsBy: { ann: 1, bob: 1, cy: 1 } })).toEqual([]);
  // Bob handed Ann's ticket, replayed: he has none of his own.
  expect(problems({ ticketsBy: { ann: 1, cy: 1 } })).toEqual([
    "ticket for bob is missing (or was replayed from another user's)",
  ]);
  expect(problems({ ticketsBy: { ann: 2, bob: 1, cy: 1, eve: 1 } })).toEqual([
    'ticket for ann: 2, expected 1',
    'ticket for eve: 1, expected 0',
  ]);
  // Dan's reminders (offline): a retry sent again, or repeat: 2 replayed instead of sent.
  const tickets = { ann: 1, bob: 1, cy: 1 };
  expect(problems({ ticketsBy: tickets, reminders: 2 })).toEqual([]);
  expect(problems({ ticketsBy: tickets, reminders: undefined })).toEqual([]); // live: not run
  expect(problems({ ticketsBy: tickets, reminders: 3 })).toEqual([
    'reminders for dan: 3, expected 2 (one, then repeat: 2)',
  ]);
  expect(problems({ ticketsBy: tickets, reminders: 1 })).toEqual([
    'reminders for dan: 1, expected 2 (one, then repeat: 2)',
  ]);
});
