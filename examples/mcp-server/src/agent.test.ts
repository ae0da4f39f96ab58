import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('lost replies, a parallel duplicate and a server restart: each ticket is created once', async () => {
  const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'mcp-server-example-')) });
  expect(result.calls).toBe(6);
  expect(result.sideEffects).toBe(3);
  expect(result.duplicates).toBe(0);
  // The retry after the lost reply, the parallel duplicate, the retry after the restart.
  expect(result.replayed).toBe(3);
  expect(result.transcript.join('\n')).toMatch(
    /connection lost[\s\S]*client error[\s\S]*T-1: Printer on fire {3}\(replayed/,
  );
});
