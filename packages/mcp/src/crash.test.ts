import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { describe, expect, it } from 'vitest';
import { REPLAYED_META } from './index.js';
import { type Crash, runHost } from './test-utils/crash-host.js';
import { modelError, texts } from './test-utils/helpdesk.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/** Run the host in a child process that SIGKILLs itself at `crash`. */
function inChild(env: {
  CRASH_DB: string;
  CRASH_EFFECTS: string;
  CRASH_AT: Crash & string;
  CRASH_TURN: string;
}) {
  return runChild(join('src', 'test-utils', 'crash-child.ts'), { cwd: packageDir, env: env });
}

function tempFiles() {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-crash-'));
  return { dbPath: join(dir, 'mcp.db'), effectsFile: join(dir, 'effects.log') };
}

describe('(5) a server process killed mid-call, on a SQLite store', () => {
  it('killed after the outcome was stored (_meta turn id): the restarted server replays it', async () => {
    const files = tempFiles();
    const turn = randomUUID();
    const child = await inChild({
      CRASH_DB: files.dbPath,
      CRASH_EFFECTS: files.effectsFile,
      CRASH_AT: 'after-persist',
      CRASH_TURN: turn,
    });
    expect(child.stderr).toBe('');
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(files.effectsFile)).toBe(1);

    // The client retries the turn against the restarted server (a new process, a new session).
    const result = await runHost({ ...files, crash: undefined, turnId: turn });
    expect(countEffects(files.effectsFile)).toBe(1);
    expect(result._meta?.[REPLAYED_META]).toBe(true);
    expect(texts(result)).toEqual(['charged 1999 usd\n\n{"replayed":true}']);
    const { chargeId } = result.structuredContent as { chargeId: string };
    expect(chargeId).toMatch(/^ch_\d+$/);
    expect(chargeId).not.toBe(`ch_${process.pid}`);
  });

  it('killed right after the side effect (_meta turn id): outcome-unknown, never a second charge', async () => {
    const files = tempFiles();
    const turn = randomUUID();
    const child = await inChild({
      CRASH_DB: files.dbPath,
      CRASH_EFFECTS: files.effectsFile,
      CRASH_AT: 'after-effect',
      CRASH_TURN: turn,
    });
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(files.effectsFile)).toBe(1);

    // The dead attempt's lease (1 s) runs out while the restarted server waits; then it is stale.
    const result = await runHost({ ...files, crash: undefined, turnId: turn });
    expect(countEffects(files.effectsFile)).toBe(1);
    expect(modelError(result)).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });

    // Another turn is another call: it runs.
    await runHost({ ...files, crash: undefined, turnId: randomUUID() });
    expect(countEffects(files.effectsFile)).toBe(2);
  });
});
