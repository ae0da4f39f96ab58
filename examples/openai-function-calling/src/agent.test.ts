import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('offline: dropped and cut replies, a parallel duplicate, retried turns: one ticket per request', async () => {
  const previous = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'openai-function-calling-')) });
    expect(result.sideEffects).toBe(2);
    expect(result.duplicates).toBe(0);
    // chat: the parallel duplicate, then both calls of the retried turn; agents: the retried run
    expect(result.replayed).toBe(4);
    expect(result.transcript.join('\n')).toMatch(/tool -> \{.*"replayed":true\}/);
  } finally {
    if (previous !== undefined) process.env.OPENAI_API_KEY = previous;
  }
}, 30_000);
