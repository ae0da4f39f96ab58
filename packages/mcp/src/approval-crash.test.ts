/**
 * Approvals across a server crash, on a SQLite store: the host (server + client in one process)
 * is SIGKILLed while the user is asked, after the approved refund ran, or once its outcome is
 * stored; the client's retry against the restarted server (a new process, a new session) never
 * refunds twice and never asks again for a decision that is stored.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { REPLAYED_META } from './index.js';
import type { Answer } from './test-utils/approval-app.js';
import { type ApprovalCrash, runApprovalHost } from './test-utils/approval-host.js';
import { modelError, texts } from './test-utils/helpdesk.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'mcp-approval-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The host in a child process: the user answers `answers`; it SIGKILLs itself at `crash`. */
async function inChild(
  files: { dbPath: string; effectsFile: string },
  turnId: string,
  answers: Answer[],
  crash: ApprovalCrash,
) {
  const { signal, out } = await runChild(join('src', 'test-utils', 'approval-child.ts'), {
    cwd: packageDir,
    env: {
      APPROVAL_DB: files.dbPath,
      APPROVAL_EFFECTS: files.effectsFile,
      APPROVAL_TURN: turnId,
      APPROVAL_ANSWERS: answers.join(','),
      APPROVAL_CRASH: crash ?? '',
    },
  });
  return { signal, out };
}

function files(name: string) {
  return { dbPath: join(dir, `${name}.db`), effectsFile: join(dir, `${name}.effects`) };
}

describe('approvals across a crash (SQLite, a new process)', () => {
  it('killed after the approved refund was stored: the retry replays it, the user is not asked again', async () => {
    const f = files('after-persist');
    const turnId = randomUUID();
    const child = await inChild(f, turnId, ['accept'], 'after-persist');
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(f.effectsFile)).toBe(1);

    const retry = await runApprovalHost({ ...f, turnId, answers: [] });
    expect(retry.asked).toBe(0);
    expect(retry.result._meta?.[REPLAYED_META]).toBe(true);
    expect(texts(retry.result)[0]).toMatch(/^refunded 30 on A-42 #1/);
    expect(countEffects(f.effectsFile)).toBe(1);
  });

  it('killed right after the approved refund ran: outcome unknown, never a second refund, not asked again', async () => {
    const f = files('after-effect');
    const turnId = randomUUID();
    const child = await inChild(f, turnId, ['accept'], 'after-effect');
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(f.effectsFile)).toBe(1);

    // The dead attempt's lease (1 s) runs out while the restarted server waits; then it is stale.
    const retry = await runApprovalHost({ ...f, turnId, answers: ['accept'] });
    expect(retry.asked).toBe(0);
    expect(modelError(retry.result)).toMatchObject({ error: 'outcome_unknown' });
    expect(countEffects(f.effectsFile)).toBe(1);
  });

  it('killed while the user was asked: nothing was decided, the restarted server asks again and runs once', async () => {
    const f = files('while-asking');
    const turnId = randomUUID();
    const child = await inChild(f, turnId, ['accept'], 'while-asking');
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(f.effectsFile)).toBe(0);

    const retry = await runApprovalHost({ ...f, turnId, answers: ['accept'] });
    expect(retry.asked).toBe(1);
    expect(texts(retry.result)).toEqual(['refunded 30 on A-42 #1']);
    const again = await runApprovalHost({ ...f, turnId, answers: [] });
    expect(again.asked).toBe(0);
    expect(again.result._meta?.[REPLAYED_META]).toBe(true);
    expect(countEffects(f.effectsFile)).toBe(1);
  });

  it('declined in one process: the stored rejection is what another process answers', async () => {
    const f = files('declined');
    const turnId = randomUUID();
    const child = await inChild(f, turnId, ['decline'], undefined);
    expect(child.signal).toBeNull();
    const first = JSON.parse(child.out.trim().split('\n').at(-1) as string);
    expect(modelError(first.result)).toMatchObject({ error: 'approval_rejected' });

    const retry = await runApprovalHost({ ...f, turnId, answers: ['accept'] });
    expect(retry.asked).toBe(0);
    expect(modelError(retry.result)).toEqual(modelError(first.result));
    expect(countEffects(f.effectsFile)).toBe(0);
  });
});
