import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutcomeUnknownError } from '@idempotent-tools/core';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Crash, chargeModel, runChargeAgent } from './test-utils/crash-agent.js';

let server: ScriptedServer;
beforeAll(async () => {
  server = await startScriptedServer({ respond: chargeModel });
});
afterAll(() => server.close());

const packageDir = fileURLToPath(new URL('..', import.meta.url));

/** Run one agent turn in a child process that SIGKILLs itself at `crash`. */
function inChild(env: { CRASH_DB: string; CRASH_EFFECTS: string; CRASH_AT: Crash & string }) {
  return runChild(join('src', 'test-utils', 'crash-child.ts'), {
    cwd: packageDir,
    env: { ...env, CRASH_BASE_URL: server.baseURL },
  });
}

// A child process per case (tsx startup) and a 1 s lease: generous timeouts for a loaded box.
describe('(5) a process killed mid-turn, on a SQLite store, over @ai-sdk/openai', () => {
  it('killed after the outcome was stored: the resumed run replays it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ai-sdk-crash-'));
    const files = { dbPath: join(dir, 'agent.db'), effectsFile: join(dir, 'effects.log') };
    const child = await inChild({
      CRASH_DB: files.dbPath,
      CRASH_EFFECTS: files.effectsFile,
      CRASH_AT: 'after-persist',
    });
    expect(child.stderr).toBe('');
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(files.effectsFile)).toBe(1);

    const outputs = await runChargeAgent({ ...files, baseURL: server.baseURL, crash: undefined });
    expect(countEffects(files.effectsFile)).toBe(1);
    expect(outputs).toEqual([
      { chargeId: expect.stringMatching(/^ch_\d+$/), amount: 1999, replayed: true },
    ]);
    expect((outputs[0] as { chargeId: string }).chargeId).not.toBe(`ch_${process.pid}`);
  });

  it('killed right after the side effect: the resumed run gets outcome-unknown, never a second charge', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ai-sdk-crash-'));
    const files = { dbPath: join(dir, 'agent.db'), effectsFile: join(dir, 'effects.log') };
    const child = await inChild({
      CRASH_DB: files.dbPath,
      CRASH_EFFECTS: files.effectsFile,
      CRASH_AT: 'after-effect',
    });
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(files.effectsFile)).toBe(1);

    // The dead attempt's lease (1 s) runs out while the resumed run waits; then it is stale.
    const outputs = await runChargeAgent({ ...files, baseURL: server.baseURL, crash: undefined });
    expect(countEffects(files.effectsFile)).toBe(1);
    expect(outputs).toHaveLength(1);
    expect(OutcomeUnknownError.isInstance(outputs[0])).toBe(true);
  });
});
