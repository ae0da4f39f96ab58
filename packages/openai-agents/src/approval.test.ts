/**
 * Finding: an Agents SDK approval (`needsApproval`) resumed from `RunState.fromString` in
 * another process failed with "No turn id" (the runner does not start the agent again, so the
 * turn derived at agent_start was gone). Now the call is linked to its turn in the store when
 * the model asks for it, and the resumed run finds it: the refund runs once, however many
 * times the saved state is resumed, in whichever process.
 *
 * Issue 25: the approval was bound to the call's arguments when the call first ran, so a saved
 * state whose pending call was edited (5 -> 500) before its first resume ran the edited call
 * once approved, and the genuine state was then refused as drift. Now the call is bound when
 * the model emits it (the observed model links the call id to the call as emitted): the
 * approval cases of @idempotent-tools/testing, each resume in another process.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runApprovalCases } from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/openai';
import { RunState, run, setTracingDisabled } from '@openai/agents';
import { afterAll, describe, expect, test } from 'vitest';
import { createIdempotency } from './index.js';
import { refundAgent, refundLookupModel, refundModel } from './test-utils/app.js';
import { createAgentsApprovalDriver, resumeInChild } from './test-utils/approval-driver.js';

const dir = mkdtempSync(join(tmpdir(), 'openai-adapter-approval-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
setTracingDisabled(true);

runApprovalCases({
  name: 'Agents SDK (wrapAgentTools, OpenAIResponsesModel, RunState resumed in another process)',
  describe,
  test,
  expect,
  createDriver: createAgentsApprovalDriver,
  supports: ['reject', 'approveEdited', 'approveForOther', 'forge'],
});

describe('Agents SDK approvals: why an approval is refused (resumed in another process)', () => {
  test('an edited state: the model reads that the approval was asked for other arguments; the genuine state runs once', async () => {
    const driver = await createAgentsApprovalDriver();
    try {
      const pending = await driver.ask({ amount: 5 });
      await pending.approveEdited({ amount: 500 });
      expect(driver.lastOutput()).toContain('asked for other arguments');
      expect(driver.lastOutput()).toContain('\\"error\\":\\"drift\\"');
      await pending.approve();
      expect(driver.lastOutput()).toContain('{\\"charged\\":5}');
      expect(await driver.effects()).toEqual([{ amount: 5 }]);
    } finally {
      await driver.close();
    }
  });

  test('a made-up state (a call id the model never emitted, with a turn id): the model reads that the call was never asked for', async () => {
    const driver = await createAgentsApprovalDriver();
    try {
      await driver.forge({ amount: 500 });
      expect(driver.lastOutput()).toContain('is for a call the model never asked for');
      expect(await driver.effects()).toEqual([]);
    } finally {
      await driver.close();
    }
  });

  test('the approval moved to another call id: its turn is unknown, refused to the developer', async () => {
    const driver = await createAgentsApprovalDriver();
    try {
      const pending = await driver.ask({ amount: 5 });
      await expect(pending.approveForOther({ amount: 500 })).rejects.toThrow(/exit 1/);
      expect(driver.lastOutput()).toContain('ConfigurationError');
      expect(await driver.effects()).toEqual([]);
    } finally {
      await driver.close();
    }
  });
});

describe('an approval resumed from RunState.fromString in another process (SQLite store)', () => {
  for (const history of ['context conversationId', 'previousResponseId'] as const) {
    test(`${history}: the approved refund runs once; no "No turn id"`, async () => {
      const name = history.replace(/\W/g, '-');
      const files = {
        APPROVAL_DB: join(dir, `${name}.db`),
        APPROVAL_STATE: join(dir, `${name}.state.json`),
        APPROVAL_EFFECTS: join(dir, `${name}.effects`),
      };
      const server = await startScriptedServer({ respond: refundModel });
      try {
        const env = { ...files, APPROVAL_BASE_URL: server.baseURL };
        // This process: the model asks for the refund; the run stops for the approval.
        const store = openSqliteStore(files.APPROVAL_DB);
        const agent = refundAgent(
          createIdempotency({ store }),
          server.baseURL,
          files.APPROVAL_EFFECTS,
        );
        const context = { conversationId: 'chat-7' };
        let previousResponseId: string | undefined;
        if (history === 'previousResponseId') {
          previousResponseId = (await run(agent, 'Hi', { context })).lastResponseId;
        }
        const options = previousResponseId === undefined ? { context } : { previousResponseId };
        const interrupted = await run(agent, 'Refund order 42, please.', options);
        expect(interrupted.interruptions.map((i) => i.name)).toEqual(['refund']);
        const saved = interrupted.state.toString();
        writeFileSync(files.APPROVAL_STATE, saved);
        expect(countEffects(files.APPROVAL_EFFECTS)).toBe(0);

        // Another process approves and resumes: the refund runs.
        const first = await resumeInChild(env);
        expect(first.code, first.out).toBe(0);
        expect(first.out).not.toMatch(/No turn id|ConfigurationError/);
        expect(JSON.parse(first.out.trim().split('\n').at(-1) as string).finalOutput).toBe(
          'Done: {"refunded":"42"}',
        );
        expect(countEffects(files.APPROVAL_EFFECTS)).toBe(1);

        // The approval is delivered again (another process), and this one resumes too: replays.
        const second = await resumeInChild(env);
        expect(second.code, second.out).toBe(0);
        expect(second.out).toContain('\\"replayed\\":true');
        const here = await RunState.fromString(agent, readFileSync(files.APPROVAL_STATE, 'utf8'));
        for (const interruption of here.getInterruptions()) here.approve(interruption);
        expect((await run(agent, here)).finalOutput).toContain('"replayed":true');
        store.close();
        expect(countEffects(files.APPROVAL_EFFECTS)).toBe(1);
      } finally {
        await server.close();
      }
    });
  }
});

describe('needsApproval bound to the exact call, with a parallel tool (SQLite, other processes)', () => {
  test('runs once after approve; the approval replayed runs nothing; the parallel tool is not run again; an edited state is refused', async () => {
    const files = {
      APPROVAL_DB: join(dir, 'lookup.db'),
      APPROVAL_STATE: join(dir, 'lookup.state.json'),
      APPROVAL_EFFECTS: join(dir, 'lookup.effects'),
      APPROVAL_LOOKUPS: join(dir, 'lookup.lookups'),
    };
    const server = await startScriptedServer({ respond: refundLookupModel });
    try {
      const env = { ...files, APPROVAL_BASE_URL: server.baseURL };
      const store = openSqliteStore(files.APPROVAL_DB);
      const agent = refundAgent(
        createIdempotency({ store }),
        server.baseURL,
        files.APPROVAL_EFFECTS,
        files.APPROVAL_LOOKUPS,
      );
      const interrupted = await run(agent, 'Refund order 42, please.', {
        context: { conversationId: 'chat-9' },
      });
      store.close();
      expect(interrupted.interruptions.map((i) => i.name)).toEqual(['refund']);
      const saved = interrupted.state.toString();
      writeFileSync(files.APPROVAL_STATE, saved);
      expect(countEffects(files.APPROVAL_EFFECTS)).toBe(0);
      expect(countEffects(files.APPROVAL_LOOKUPS)).toBe(1);

      const first = await resumeInChild(env);
      expect(first.code, first.out).toBe(0);
      expect(first.out).toContain('{\\"refunded\\":\\"42\\"}');
      expect(countEffects(files.APPROVAL_EFFECTS)).toBe(1);
      expect(countEffects(files.APPROVAL_LOOKUPS)).toBe(1);

      const second = await resumeInChild(env);
      expect(second.code, second.out).toBe(0);
      expect(second.out).toContain('\\"replayed\\":true');
      expect(countEffects(files.APPROVAL_EFFECTS)).toBe(1);
      expect(countEffects(files.APPROVAL_LOOKUPS)).toBe(1);

      // The saved state edited so that the approved refund is of another order: refused.
      const edited = saved.replaceAll('\\"order\\":\\"42\\"', '\\"order\\":\\"9000\\"');
      expect(edited).not.toBe(saved);
      writeFileSync(files.APPROVAL_STATE, edited);
      const third = await resumeInChild(env);
      expect(third.code, third.out).toBe(0);
      expect(third.out).toMatch(/asked for other arguments/);
      expect(countEffects(files.APPROVAL_EFFECTS)).toBe(1);
    } finally {
      await server.close();
    }
  });
});
