import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('two users, lost replies, a parallel duplicate, a new turn and a server restart: one ticket per user turn', async () => {
  const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'mcp-server-example-')) });
  expect(result.calls).toBe(8);
  // Alice's first ticket, Bob's own (same words), the VPN one, Alice's new turn, the laptop one.
  expect(result.sideEffects).toBe(5);
  expect(result.duplicates).toBe(0);
  // The retry after the lost reply, the parallel duplicate, the retry after the restart.
  expect(result.replayed).toBe(3);
  const transcript = result.transcript.join('\n');
  expect(transcript).toMatch(
    /connection lost[\s\S]*client error[\s\S]*alice: Created ticket T-1: Printer on fire \{"replayed":true\}/,
  );
  expect(transcript).toContain('bob: Created ticket T-2: Printer on fire\n');
  expect(transcript).toContain('alice: Created ticket T-4: Printer on fire\n');
});
