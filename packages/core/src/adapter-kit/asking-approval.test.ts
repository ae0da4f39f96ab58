import { describe, expect, test } from 'vitest';
import { type Approval, type AskApproval, createApprovals } from '../approvals/approvals.js';
import { ApprovalPendingError, ConfigurationError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { type AskingApproval, askingApprovalField, runAsking } from './asking-approval.js';
import { type PreparedCall, prepareCall } from './pipeline.js';

type Info = { args: Record<string, unknown>; client?: string };
const check = askingApprovalField<Info>({
  args: (call) => call.args,
  by: (call) => `client ${call.client ?? 'unknown'}`,
});
const tool = { toolName: 'refund', treatment: 'wrap' as const, caller: 'wrapServer' };
const field = (value: unknown, treatment: 'wrap' | 'exclude' | 'unsafe' = 'wrap') =>
  check(value, { ...tool, treatment }) as AskingApproval<Info> | undefined;
const refused = (value: unknown, treatment?: 'wrap' | 'exclude' | 'unsafe') => {
  try {
    field(value, treatment);
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
};
const approval = { key: 'a_1', toolName: 'refund', status: 'pending' } as Approval;

describe('askingApprovalField', () => {
  test('true asks with the defaults: the arguments appended, the adapter says who decides', () => {
    const asking = field(true) as AskingApproval<Info>;
    const call = { args: { order: 7 }, client: 'desk' };
    expect(asking.message(call)).toBe(
      `Allow refund to run with these arguments?\n\n${JSON.stringify({ order: 7 }, null, 2)}`,
    );
    expect(asking.by(call)).toBe('client desk');
    expect(asking.timeout).toBe(600_000);
    expect(field(false)).toBeUndefined();
  });

  test('own message, by and timeout; an empty by falls back to the default, cut at 512', () => {
    const asking = field({
      message: (call: Info) => `Refund order ${String(call.args.order)}?`,
      by: (call: Info) => (call.client === 'x' ? 'x'.repeat(600) : ''),
      timeout: 1000,
    }) as AskingApproval<Info>;
    expect(asking.message({ args: { order: 7 } })).toBe('Refund order 7?');
    expect(asking.by({ args: {}, client: 'x' })).toHaveLength(512);
    expect(asking.by({ args: {} })).toBe('client unknown');
    expect(asking.timeout).toBe(1000);
    const text = field({ message: 'Refund?' }) as AskingApproval<Info>;
    expect(text.message({ args: { order: 1 } })).toBe(
      `Refund?\n\n${JSON.stringify({ order: 1 }, null, 2)}`,
    );
  });

  test('bad values, misspelt fields and tools that never ask are refused, naming the field', () => {
    expect(refused('yes').option).toBe('policies.refund.approval');
    expect(refused({ mesage: 'x' })).toMatchObject({
      option: 'policies.refund.approval.mesage',
      message: expect.stringContaining('did you mean "message"?'),
    });
    expect(refused({ message: ' ' }).option).toBe('policies.refund.approval.message');
    expect(refused({ by: 'alice' }).option).toBe('policies.refund.approval.by');
    expect(refused({ timeout: 0 }).option).toBe('policies.refund.approval.timeout');
    expect(refused(true, 'unsafe').message).toBe(
      'wrapServer: policies.refund.approval: refund is in unsafe, so it runs without the wrapper and never asks. Take it out of unsafe, or leave out approval.',
    );
  });

  test('the answer: accepted, declined (a reason), or nothing decided (ApprovalPendingError)', () => {
    const asking = field(true) as AskingApproval<Info>;
    const call = { args: {}, client: 'desk' };
    expect(asking.answer(call, true, approval)).toEqual({ approved: true, by: 'client desk' });
    expect(asking.answer(call, false, approval)).toEqual({
      approved: false,
      by: 'client desk',
      reason: 'the user declined it',
    });
    let closed: unknown;
    try {
      asking.answer(call, undefined, approval);
    } catch (error) {
      closed = error;
    }
    expect(ApprovalPendingError.isInstance(closed)).toBe(true);
    expect((closed as Error).message).toMatch(/^The user closed the approval request of refund/);
  });
});

describe('runAsking', () => {
  const setup = () => {
    const adapter = createAdapter<Info>(
      { store: createMemoryStore(), turnId: 't1' },
      {
        caller: 'wrapServer',
        howTo: 'turnId',
      },
    );
    const approvals = createApprovals(adapter.executor);
    const runs: unknown[] = [];
    const execute = (args: unknown) => {
      runs.push(args);
      return { done: runs.length };
    };
    const prepare = async (order: number) => {
      const given = {
        toolName: 'refund',
        input: { order },
        parsed: true,
        info: () => ({ args: {} }),
      };
      return ((await prepareCall(adapter, given)) as { prepared: PreparedCall<Info> }).prepared;
    };
    return { adapter, approvals, runs, execute, prepare };
  };

  test('asked while nothing is decided, the answer stored: approved runs once, then replays unasked', async () => {
    const { adapter, approvals, runs, execute, prepare } = setup();
    let asked = 0;
    const ask: AskApproval = async ({ request }) => {
      asked++;
      await request();
      return { approved: true, by: 'alice' };
    };
    const first = await runAsking(adapter, approvals, await prepare(1), execute, ask);
    expect(first).toEqual({ output: { done: 1 } });
    const again = await runAsking(adapter, approvals, await prepare(1), execute, ask);
    expect(again).toEqual({ output: { done: 1, replayed: true } });
    expect({ asked, runs }).toEqual({ asked: 1, runs: [{ order: 1 }] });
  });

  test("declined: the model's text, stored; nothing decided: the model's text, asked again", async () => {
    const { adapter, approvals, runs, execute, prepare } = setup();
    const decline: AskApproval = async ({ request }) => {
      await request();
      return { approved: false, by: 'bob', reason: 'no' };
    };
    const rejected = await runAsking(adapter, approvals, await prepare(2), execute, decline);
    expect(JSON.parse((rejected as { text: string }).text)).toMatchObject({
      error: 'approval_rejected',
    });
    let asked = 0;
    const close: AskApproval = async ({ request }) => {
      asked++;
      throw new ApprovalPendingError({ approval: await request(), closed: true });
    };
    for (const _ of [1, 2]) {
      const pending = await runAsking(adapter, approvals, await prepare(3), execute, close);
      expect(JSON.parse((pending as { text: string }).text)).toMatchObject({
        error: 'approval_pending',
        next: 'retry-later',
      });
    }
    expect({ asked, runs }).toEqual({ asked: 2, runs: [] });
    // No question: as runPrepared.
    const plain = await runAsking(adapter, approvals, await prepare(4), execute, undefined);
    expect(plain).toEqual({ output: { done: 1 } });
  });
});
