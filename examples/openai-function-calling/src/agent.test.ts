import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { main } from './agent.js';

test('offline: dropped and cut replies, a parallel duplicate, retried turns, two users with the same words', async () => {
  const previous = process.env.OPENAI_API_KEY;
  delete process.env.OPENAI_API_KEY;
  try {
    const result = await main({ dataDir: mkdtempSync(join(tmpdir(), 'openai-function-calling-')) });
    // Ann and Bob sent the same words in their own chats: one ticket each; Cy's VPN: one.
    expect(result.users).toEqual(['ann', 'bob', 'cy']);
    expect(result.duplicates).toBe(0);
    // Ann: the parallel duplicate, then both calls of the retried turn; Bob: his parallel
    // duplicate (his first call ran, it was not Ann's replayed); Cy: the retried run.
    expect(result.replayed).toBe(5);
    expect(result.transcript.join('\n')).toMatch(/tool -> \{.*"replayed":true\}/);
  } finally {
    if (previous !== undefined) process.env.OPENAI_API_KEY = previous;
  }
}, 30_000);
