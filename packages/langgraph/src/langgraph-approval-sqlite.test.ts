/**
 * approvalTask across processes on LangGraph's SqliteSaver and the SQLite idempotency store: a
 * run paused for approval in a child process, resumed here; and a child SIGKILLed right after
 * the approved charge was stored (before the checkpoint), resumed here with the approval sent
 * again: one decision, one charge, the parallel task not re-run.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApprovals, createIdempotency, type IdempotencyEvent } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { Command } from '@langchain/langgraph';
import { afterAll, describe, expect, test } from 'vitest';
import type { ApprovalRequest } from './index.js';
import { approvalCheckout } from './test-utils/approval-checkout.js';
import { openSqliteSaver } from './test-utils/node-sqlite-saver.js';

const child = fileURLToPath(new URL('./test-utils/langgraph-approval-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'langgraph-approval-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const scenario = () => ({
  checkpointFile: join(dir, `${randomUUID()}.checkpoints.db`),
  sqliteFile: join(dir, `${randomUUID()}.db`),
  chargesFile: join(dir, `${randomUUID()}.charges`),
  labelsFile: join(dir, `${randomUUID()}.labels`),
  threadId: `thread-${randomUUID()}`,
});
type Scenario = ReturnType<typeof scenario>;

function runApprovalChild(s: Scenario, mode: 'pause' | 'crash') {
  return runChild(child, {
    cwd: packageDir,
    env: {
      CHECKPOINT_FILE: s.checkpointFile,
      SQLITE_FILE: s.sqliteFile,
      CHARGES_FILE: s.chargesFile,
      LABELS_FILE: s.labelsFile,
      THREAD_ID: s.threadId,
      MODE: mode,
      BY: 'alice',
    },
  });
}

/** This process takes the thread over: the same checkpoint file and idempotency file. */
function resume(s: Scenario) {
  const events: IdempotencyEvent[] = [];
  const store = openSqliteStore(s.sqliteFile);
  const checkpointer = openSqliteSaver(s.checkpointFile);
  const idempotency = createIdempotency({ store, onEvent: (e) => void events.push(e) });
  const workflow = approvalCheckout({
    checkpointer,
    idempotency,
    chargesFile: s.chargesFile,
    labelsFile: s.labelsFile,
  });
  const config = { configurable: { thread_id: s.threadId } };
  const close = () => {
    store.close();
    checkpointer.close();
  };
  return { workflow, config, events, approvals: createApprovals(idempotency), close };
}

const approve = (approvalKey: string, by: string) =>
  new Command({ resume: { type: 'approve', approvalKey, by } });
const receipt = { chargeId: 'ch_1', amount: 40 };

describe('SqliteSaver + SQLite store, two processes', () => {
  test('paused for approval in one process, approved in another: one charge, one label', async () => {
    const s = scenario();
    const paused = await runApprovalChild(s, 'pause');
    expect({ code: paused.code, stderr: paused.stderr }).toEqual({ code: 0, stderr: '' });
    const request = JSON.parse(paused.stdout) as ApprovalRequest;
    expect(request).toMatchObject({
      type: 'approval_request',
      taskName: 'charge',
      args: [{ id: 'o-1', amount: 40 }],
      description: 'Charge 40 EUR for order o-1',
    });
    expect(countEffects(s.chargesFile)).toBe(0);
    expect(countEffects(s.labelsFile)).toBe(1); // the parallel task finished before the pause

    const { workflow, config, events, approvals, close } = resume(s);
    try {
      const done = await workflow.invoke(approve(request.approvalKey, 'alice'), config);
      expect(done).toEqual({ receipt, shipping: { label: 'L-o-1' } });
      // The same approval sent again (a double click): no second decision, no second charge.
      await workflow.invoke(approve(request.approvalKey, 'bob'), config);
      expect(await approvals.getApproval(request.approvalKey)).toMatchObject({
        status: 'approved',
        by: 'alice',
      });
      expect(events.filter((e) => e.outcome === 'executed').map((e) => e.toolName)).toEqual([
        'charge',
      ]);
    } finally {
      close();
    }
    expect(countEffects(s.chargesFile)).toBe(1);
    expect(countEffects(s.labelsFile)).toBe(1);
  });

  test('killed after the approved charge was stored, before the checkpoint: the resume replays it', async () => {
    const s = scenario();
    const crashed = await runApprovalChild(s, 'crash');
    expect({ signal: crashed.signal, stderr: crashed.stderr }).toEqual({
      signal: 'SIGKILL',
      stderr: '',
    });
    expect(countEffects(s.chargesFile)).toBe(1);

    const { workflow, config, events, approvals, close } = resume(s);
    try {
      // The approver's app never got an answer: it sends the approval again (another person).
      const state = await workflow.getState(config);
      const request = state.tasks.flatMap((t) => t.interrupts)[0]?.value as ApprovalRequest;
      expect(request.approvalKey).toMatch(/^v1_/);
      const done = await workflow.invoke(approve(request.approvalKey, 'bob'), config);
      expect(done).toEqual({ receipt, shipping: { label: 'L-o-1' } });
      expect(events.map((e) => [e.toolName, e.outcome])).toContainEqual(['charge', 'replayed']);
      expect(events.filter((e) => e.outcome === 'executed')).toEqual([]);
      expect(await approvals.getApproval(request.approvalKey)).toMatchObject({
        status: 'approved',
        by: 'alice',
      });
    } finally {
      close();
    }
    expect(countEffects(s.chargesFile)).toBe(1);
    expect(countEffects(s.labelsFile)).toBe(1);
  });
});
