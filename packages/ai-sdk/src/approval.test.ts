/**
 * The AI SDK's own approval flow (tool `needsApproval`: a `tool-approval-request`, then the
 * client's `tool-approval-response` in the messages), bound to the exact call on the store:
 * the request that carries the approval, handled by another process on the same SQLite file,
 * runs the tool once; the approval sent again runs nothing again; an approval whose call was
 * edited to other arguments is refused to the app and runs nothing; the parallel tool that needed
 * no approval is not run again. Through the real generateText / streamText loop and the real @ai-sdk/openai client.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countEffects, lastJsonLine, runChild } from '@idempotent-tools/testing';
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/openai';
import type { ModelMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  billingRequest,
  type Files,
  refundModel,
  withApprovalResponses,
} from './test-utils/approval-app.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'ai-sdk-approval-'));
let server: ScriptedServer;
beforeAll(async () => {
  server = await startScriptedServer({ respond: refundModel });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

function filesFor(name: string): Files {
  return {
    db: join(dir, `${name}.db`),
    refunds: join(dir, `${name}.refunds`),
    lookups: join(dir, `${name}.lookups`),
  };
}

/** The request carrying `messages`, handled in a child process. */
async function inChild(files: Files, messages: ModelMessage[], name: string) {
  const file = join(dir, `${name}.messages.json`);
  writeFileSync(file, JSON.stringify(messages));
  const { code, out } = await runChild(join('src', 'test-utils', 'approval-child.ts'), {
    cwd: packageDir,
    env: {
      APPROVAL_BASE_URL: server.baseURL,
      APPROVAL_DB: files.db,
      APPROVAL_REFUNDS: files.refunds,
      APPROVAL_LOOKUPS: files.lookups,
      APPROVAL_MESSAGES: file,
    },
  });
  if (code !== 0) throw new Error(`child exited ${code}: ${out}`);
  return lastJsonLine<{
    text: string;
    outputs: unknown[];
    error?: { name: string; code?: string; field?: string; message: string };
  }>(out);
}

const user: ModelMessage = { role: 'user', content: 'Refund order 42, please.' };

/** The first request: the model calls lookup_order and refund; refund waits for approval. */
async function firstRequest(files: Files, mode?: 'generateText' | 'streamText') {
  const first = await billingRequest({ baseURL: server.baseURL, files, messages: [user], mode });
  expect(first.approvalRequests.map((r) => r.toolName)).toEqual(['refund']);
  expect(countEffects(files.refunds)).toBe(0);
  expect(countEffects(files.lookups)).toBe(1);
  return { history: [user, ...first.responseMessages], request: first.approvalRequests[0] };
}

describe('AI SDK needsApproval, resumed in another process on SQLite', () => {
  test('approved: runs once; the approval sent again replays; edited args run nothing', async () => {
    const files = filesFor('generate');
    const { history, request } = await firstRequest(files);
    const approved = withApprovalResponses(history, [
      { approvalId: request?.approvalId as string, approved: true },
    ]);

    // Another process handles the approval: the refund runs, the lookup does not run again.
    const second = await inChild(files, approved, 'approved');
    expect(second.outputs).toEqual([{ order: '42', total: 1999 }, { refunded: '42' }]);
    expect(second.text).toContain('{"refunded":"42"}');
    expect(countEffects(files.refunds)).toBe(1);
    expect(countEffects(files.lookups)).toBe(1);

    // The client sends the same approval again (a lost reply, a reload): replayed, not run.
    const third = await inChild(files, approved, 'resent');
    expect(third.outputs).toEqual([
      { order: '42', total: 1999 },
      { refunded: '42', replayed: true },
    ]);
    expect(countEffects(files.refunds)).toBe(1);

    // The approved call edited to other arguments (a tampered history): the model never asked
    // about that call, so the request is refused to the app (generateText rejects, as the SDK's
    // own signed approvals do); nothing runs.
    const edited = structuredClone(approved);
    for (const message of edited) {
      if (message.role !== 'assistant' || typeof message.content === 'string') continue;
      for (const part of message.content) {
        if (part.type === 'tool-call' && part.toolName === 'refund') part.input = { order: '9000' };
      }
    }
    const fourth = await inChild(files, edited, 'edited');
    expect(fourth.error).toMatchObject({
      name: 'InvalidInputError',
      code: 'invalid_input',
      field: 'messages',
      message: expect.stringMatching(/never asked to approve/),
    });
    expect(countEffects(files.refunds)).toBe(1);
    expect(countEffects(files.lookups)).toBe(1);
  });

  test('streamText: approve once, the resent approval replays; a rejection runs nothing', async () => {
    const files = filesFor('stream');
    const { history, request } = await firstRequest(files, 'streamText');
    const approvalId = request?.approvalId as string;
    const approved = withApprovalResponses(history, [{ approvalId, approved: true }]);
    const run = (messages: ModelMessage[]) =>
      billingRequest({ baseURL: server.baseURL, files, messages, mode: 'streamText' });
    expect((await run(approved)).outputs).toEqual([
      { order: '42', total: 1999 },
      { refunded: '42' },
    ]);
    expect((await run(approved)).outputs).toEqual([
      { order: '42', total: 1999 },
      { refunded: '42', replayed: true },
    ]);
    expect(countEffects(files.refunds)).toBe(1);
    expect(countEffects(files.lookups)).toBe(1);

    // Another conversation turn, rejected: the SDK denies it; nothing runs.
    const files2 = filesFor('stream-rejected');
    const other = await firstRequest(files2, 'streamText');
    const rejected = withApprovalResponses(other.history, [
      { approvalId: other.request?.approvalId as string, approved: false, reason: 'no' },
    ]);
    const denied = await billingRequest({
      baseURL: server.baseURL,
      files: files2,
      messages: rejected,
      mode: 'streamText',
    });
    expect(denied.outputs).toEqual([expect.anything(), expect.stringMatching(/denied|no/i)]);
    expect(countEffects(files2.refunds)).toBe(0);
  });
});
