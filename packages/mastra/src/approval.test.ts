/**
 * `requireApproval` bound to the exact call, decided in other processes than the one whose run
 * suspended (Mastra memory and run snapshots on LibSQL, idempotency records on SQLite), through
 * Mastra's real agent loop and the scripted model.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { APPROVAL_TOOL_NAMES, type Approval, createMemoryStore } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, lastJsonLine, runChild } from '@idempotent-tools/testing';
import { createTool } from '@mastra/core/tools';
import { afterAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  createApprovals,
  createIdempotency,
  declineToolCallGenerate,
  getToolCallApproval,
  idempotentTools,
} from './index.js';
import { carryOut, libsql, makeAgent, startModelServer } from './test-utils/app.js';

const child = fileURLToPath(new URL('./test-utils/approval-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** One process of the app (see test-utils/approval-child.ts): its JSON line. */
async function inChild(env: Record<string, string>): Promise<Record<string, unknown>> {
  const { code, out } = await runChild(child, { cwd: packageDir, env });
  if (code !== 0) throw new Error(`Error: exit ${code}\n${out}`);
  return lastJsonLine(out);
}

/** A run suspended for the approval of `carry_out` in a process that has exited. */
async function suspended() {
  const DIR = mkdtempSync(join(tmpdir(), 'mastra-adapter-approval-'));
  dirs.push(DIR);
  const out = await inChild({ MODE: 'suspend', DIR });
  expect(out.finishReason).toBe('suspended');
  const env = { DIR, RUN_ID: String(out.runId), CALL_ID: String(out.toolCallId) };
  const decide = (MODE: string) => inChild({ ...env, MODE });
  const effects = () => countEffects(join(DIR, 'effects'));
  /** The approval as the store holds it (read here, in the test's process). */
  const stored = async (key: string) => {
    const store = openSqliteStore(join(DIR, 'idempotency.db'));
    try {
      return await createApprovals(createIdempotency({ store })).getApproval(key);
    } finally {
      store.close();
    }
  };
  const { approval } = (await decide('status')) as { approval: Approval };
  expect(approval).toMatchObject({ status: 'pending', toolName: 'carry_out' });
  expect(effects()).toBe(0);
  return { decide, effects, stored, key: approval.key };
}

describe('requireApproval decided in another process (SQLite store, LibSQL snapshots)', () => {
  test('approved (approveToolCallGenerate helper): runs once; approved again: nothing runs twice', async () => {
    const { decide, effects, stored, key } = await suspended();
    const approved = await decide('approve');
    expect(approved.results).toEqual([{ done: 'Cancel my subscription.' }]);
    expect(effects()).toBe(1);
    expect(await stored(key)).toMatchObject({ status: 'approved', by: 'alice@example.com' });
    // The same approval delivered again (a double click, another tab, another process).
    expect(await decide('approve')).toMatchObject({ error: { name: 'InvalidInputError' } });
    expect(await decide('mastra-approve')).toHaveProperty('error');
    expect(effects()).toBe(1);
    expect(await stored(key)).toMatchObject({ status: 'approved', by: 'alice@example.com' });
  });

  test("approved with Mastra's own approveToolCallGenerate: pinned to the call when it runs", async () => {
    const { decide, effects, stored, key } = await suspended();
    const approved = await decide('mastra-approve');
    expect(approved.results).toEqual([{ done: 'Cancel my subscription.' }]);
    expect(effects()).toBe(1);
    expect(await stored(key)).toMatchObject({ status: 'approved', by: expect.any(String) });
  });

  test('declined (declineToolCallGenerate helper): stored as rejected, nothing ran; declined again decides nothing', async () => {
    const { decide, effects, stored, key } = await suspended();
    const declined = await decide('decline');
    expect(declined.text).toBe('Done: No.'); // Mastra hands the reason to the model
    expect(effects()).toBe(0);
    const rejection = await stored(key);
    expect(rejection).toMatchObject({ status: 'rejected', by: 'bob@example.com', reason: 'No.' });
    expect(await decide('decline')).toMatchObject({ error: { name: 'InvalidInputError' } });
    expect(await stored(key)).toEqual(rejection);
    expect(effects()).toBe(0);
  });

  test('a decline stored before Mastra resumed (a crash in between): an approval later runs nothing', async () => {
    const { decide, effects, stored, key } = await suspended();
    const { approval } = (await decide('record-decline')) as { approval: Approval };
    expect(approval).toMatchObject({ key, status: 'rejected', by: 'bob@example.com' });
    // The same decline sent again: the same decision.
    expect(await decide('record-decline')).toEqual({ approval });
    // Approved through this package: refused before Mastra resumes.
    expect(await decide('approve')).toMatchObject({ error: { name: 'ApprovalConflictError' } });
    // Approved through Mastra alone: the call reaches execute, which refuses it (without asking).
    const late = await decide('mastra-approve');
    expect(String(late.text)).toContain('approval_rejected');
    expect(String(late.text)).toContain('bob@example.com');
    expect(effects()).toBe(0);
    expect(await stored(key)).toMatchObject({ status: 'rejected' });
  });

  test('a run snapshot edited to other arguments: the approval does not authorise them', async () => {
    const { decide, effects } = await suspended();
    expect(await decide('tamper')).toMatchObject({ edited: expect.any(Number) });
    // This package's helper reads the edited call: refused, nothing decided.
    expect(await decide('approve')).toMatchObject({ error: { name: 'DriftError' } });
    // Mastra alone resumes with the edited args: execute refuses them, nothing ran.
    const resumed = await decide('mastra-approve');
    expect(String(resumed.text)).toMatch(/"error":"drift"/);
    expect(effects()).toBe(0);
  });
});

describe('requireApproval in one process (memory thread)', () => {
  test('the model asks again for a declined call: the app sees it rejected and declines it without asking', async () => {
    const server = await startModelServer((turn) =>
      turn.toolOutputs.length < 2
        ? { toolCalls: [{ name: 'carry_out', arguments: { request: turn.userText } }] }
        : { content: 'I will not.' },
    );
    try {
      const effects: string[] = [];
      const tools = idempotentTools(
        { carry_out: carryOut(effects, true) },
        { store: createMemoryStore() },
      );
      const agent = makeAgent({ server, tools, storage: libsql() });
      const memory = { memory: { thread: 'chat-2', resource: 'user-1' } };
      const first = await agent.generate('Cancel my subscription.', memory);
      expect(first.finishReason).toBe('suspended');
      const target = (out: typeof first) => ({
        runId: out.runId as string,
        toolCallId: (out.suspendPayload as { toolCallId: string }).toolCallId,
        ...memory,
      });
      const again = await declineToolCallGenerate(agent, {
        ...target(first),
        by: 'bob@example.com',
        reason: 'Not this one.',
      });
      // The model asked for the same call again: Mastra suspends for it once more.
      expect(again.finishReason).toBe('suspended');
      expect(target(again).toolCallId).not.toBe(target(first).toolCallId);
      const standing = await getToolCallApproval(agent, target(again));
      expect(standing).toMatchObject({ status: 'rejected', by: 'bob@example.com' });
      const last = await agent.declineToolCallGenerate({
        ...target(again),
        reason: 'Declined before.',
      });
      expect(last.text).toBe('I will not.');
      expect(effects).toEqual([]);
    } finally {
      await server.close();
    }
  });

  test('a requireApproval function that lets the call through: no approval is asked or stored', async () => {
    const server = await startModelServer();
    try {
      const effects: string[] = [];
      const carry = createTool({
        id: 'carry_out',
        description: "Carry out the user's request.",
        inputSchema: z.object({ request: z.string() }),
        requireApproval: async ({ request }) => request.startsWith('Delete'),
        execute: async ({ request }) => {
          effects.push(request);
          return { done: request };
        },
      });
      const store = createMemoryStore();
      const tools = idempotentTools({ carry_out: carry }, { store });
      const agent = makeAgent({ server, tools, storage: libsql() });
      const out = await agent.generate('Send it.', { memory: { thread: 't', resource: 'u' } });
      expect(out.finishReason).toBe('stop');
      expect(effects).toEqual(['Send it.']);
      const listed = (await store.list?.({}))?.records ?? [];
      // The call's outcome, and the record that the model emitted it (written before Mastra's
      // gate, which has no call id, is asked): no approval.
      expect(listed.map((r) => r.meta?.toolName).sort()).toEqual([
        'carry_out',
        APPROVAL_TOOL_NAMES.asked,
      ]);
    } finally {
      await server.close();
    }
  });
});
