/**
 * Processes killed mid-turn and restarted, on durable state (Mastra memory and run snapshots on
 * LibSQL, idempotency records on SQLite): never a second side effect.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countEffects, lastJsonLine, runChild } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const newDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'mastra-adapter-crash-'));
  dirs.push(dir);
  return dir;
};

const inChild = (env: Record<string, string>) => runChild(child, { cwd: packageDir, env });

describe('a process killed after the tool ran, the turn resumed in another process', () => {
  test('the same turn sent again after the crash: replayed, one effect', async () => {
    const DIR = newDir();
    const killed = await inChild({ MODE: 'turn', CRASH: 'after-persist', DIR });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    const resumed = await inChild({ MODE: 'turn', DIR });
    expect(resumed.signal, resumed.out).toBe(null);
    expect(lastJsonLine(resumed.out).text).toContain('"replayed":true');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });

  test('a tool that saved the thread mid-run (flushMessages), killed in it: the same words are refused (turnId), one effect', async () => {
    const DIR = newDir();
    const killed = await inChild({ MODE: 'turn', CRASH: 'in-tool-after-flush', DIR });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    // The thread holds the call with no outcome: a broken run's, or a finished one's? Refused.
    const again = await inChild({ MODE: 'turn', DIR });
    expect(again.signal, again.out).toBe(null);
    expect(lastJsonLine(again.out).error).toMatchObject({
      name: 'ConfigurationError',
      code: 'configuration',
      message: expect.stringMatching(/broken attempt.*Pass turnId/s),
    });
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });

  test('requireApproval: approved after a restart, killed, approved again: one effect', async () => {
    const DIR = newDir();
    const suspended = await inChild({ MODE: 'suspend', DIR });
    const { finishReason, runId, toolCallId } = lastJsonLine<{
      finishReason: string;
      runId: string;
      toolCallId: string;
    }>(suspended.out);
    expect(finishReason, suspended.out).toBe('suspended');
    expect(countEffects(join(DIR, 'effects'))).toBe(0);
    const env = { DIR, RUN_ID: runId, CALL_ID: toolCallId };
    const killed = await inChild({ ...env, MODE: 'approve', CRASH: 'after-persist' });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    const approved = await inChild({ ...env, MODE: 'approve' });
    expect(approved.signal, approved.out).toBe(null);
    expect(lastJsonLine(approved.out).results).toEqual([
      { done: 'Cancel my subscription.', replayed: true },
    ]);
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });
});
