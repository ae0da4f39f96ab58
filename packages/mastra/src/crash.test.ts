/**
 * Processes killed mid-turn and restarted, on durable state (Mastra memory and run snapshots on
 * LibSQL, idempotency records on SQLite): never a second side effect.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countEffects } from '@idempotent-tools/testing';
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

function runChild(
  env: Record<string, string>,
): Promise<{ signal: NodeJS.Signals | null; out: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', child], {
      cwd: packageDir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (out += d));
    proc.on('error', reject);
    proc.on('close', (_code, signal) => resolve({ signal, out }));
  });
}
const lastJson = (out: string) => JSON.parse(out.trim().split('\n').at(-1) as string);

describe('a process killed after the tool ran, the turn resumed in another process', () => {
  test('the same turn sent again after the crash: replayed, one effect', async () => {
    const DIR = newDir();
    const killed = await runChild({ MODE: 'turn', CRASH: 'after-persist', DIR });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    const resumed = await runChild({ MODE: 'turn', DIR });
    expect(resumed.signal, resumed.out).toBe(null);
    expect(lastJson(resumed.out).text).toContain('"replayed":true');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });

  test('a tool that saved the thread mid-run (flushMessages), killed in it: the same words are refused (turnId), one effect', async () => {
    const DIR = newDir();
    const killed = await runChild({ MODE: 'turn', CRASH: 'in-tool-after-flush', DIR });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    // The thread holds the call with no outcome: a broken run's, or a finished one's? Refused.
    const again = await runChild({ MODE: 'turn', DIR });
    expect(again.signal, again.out).toBe(null);
    expect(lastJson(again.out).error).toMatchObject({
      name: 'ConfigurationError',
      code: 'configuration',
      message: expect.stringMatching(/broken attempt.*Pass turnId/s),
    });
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });

  test('requireApproval: approved after a restart, killed, approved again: one effect', async () => {
    const DIR = newDir();
    const suspended = await runChild({ MODE: 'suspend', DIR });
    const { finishReason, runId, toolCallId } = lastJson(suspended.out);
    expect(finishReason, suspended.out).toBe('suspended');
    expect(countEffects(join(DIR, 'effects'))).toBe(0);
    const env = { DIR, RUN_ID: runId, CALL_ID: toolCallId };
    const killed = await runChild({ ...env, MODE: 'approve', CRASH: 'after-persist' });
    expect(killed.signal, killed.out).toBe('SIGKILL');
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
    const approved = await runChild({ ...env, MODE: 'approve' });
    expect(approved.signal, approved.out).toBe(null);
    expect(lastJson(approved.out).results).toEqual([
      { done: 'Cancel my subscription.', replayed: true },
    ]);
    expect(countEffects(join(DIR, 'effects'))).toBe(1);
  });
});
