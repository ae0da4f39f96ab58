import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('offline: the retried charge and the duplicate receipt are replayed, each effect runs once', async () => {
  const previous = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'ai-sdk-agent-')) });
    expect(result.charges).toBe(1);
    expect(result.receipts).toBe(1);
    expect(result.sideEffects).toBe(2);
    // The retry in step 3, the parallel receipt, and the restarted server's charge.
    expect(result.replayed).toBe(3);
    expect(result.transcript.join('\n')).toMatch(/"replayed":true\}\s+\[call_3\]/);
  } finally {
    if (previous !== undefined) process.env.OPENAI_API_KEY = previous;
  }
});
