import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main, problems } from './agent.js';

test('two users, lost replies, a parallel duplicate, a new turn and a server restart: one ticket per user turn', async () => {
  const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'mcp-server-example-')) });
  expect(result.calls).toBe(8);
  // Alice's first ticket, Bob's own (same words), the VPN one, Alice's new turn, the laptop one.
  expect(result.sideEffects).toBe(5);
  expect(result.duplicates).toBe(0);
  // Five user turns (Alice's first, Bob's, the VPN, the new printer turn, the laptop): one each.
  expect(result.turns.map((t) => `${t.user} ${t.title} ${t.tickets}`)).toEqual([
    'alice Printer on fire 1',
    'bob Printer on fire 1',
    'alice VPN down 1',
    'alice Printer on fire 1',
    'alice Laptop stolen 1',
  ]);
  expect(problems(result)).toEqual([]); // what npm start checks
  // The retry after the lost reply, the parallel duplicate, the retry after the restart.
  expect(result.replayed).toBe(3);
  const transcript = result.transcript.join('\n');
  expect(transcript).toMatch(
    /connection lost[\s\S]*client error[\s\S]*alice: Created ticket T-1: Printer on fire \{"replayed":true\}/,
  );
  expect(transcript).toContain('bob: Created ticket T-2: Printer on fire\n');
  expect(transcript).toContain('alice: Created ticket T-4: Printer on fire\n');
});

test("npm start's check fails on a turn with two tickets, with none, and on a stray ticket", () => {
  const turn = (user: string, title: string, tickets: number) => ({ user, title, tickets });
  expect(
    problems({
      turns: [turn('alice', 'Printer on fire', 1), turn('bob', 'Printer on fire', 0)],
      strays: 0,
    }),
  ).toEqual(['bob\'s turn "Printer on fire": no ticket (missing, or another user\'s replayed)']);
  expect(problems({ turns: [turn('alice', 'VPN down', 2)], strays: 1 })).toEqual([
    'alice\'s turn "VPN down": 2 tickets, expected 1',
    '1 ticket(s) for no turn a user sent',
  ]);
});
