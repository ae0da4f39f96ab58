import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('offline: the retry and the duplicate are replayed, a new turn and a new chat run', async () => {
  delete process.env.OPENAI_API_KEY;
  const { refunds, lines } = await main({ dataDir: mkdtempSync(join(tmpdir(), 'mastra-agent-')) });
  expect(refunds).toEqual({ '1001': 2, '1002': 1 });
  expect(lines).toContain('   the stream broke after the refund ran: yes');
  expect(lines).toContain('   tool results replayed: yes');
});
