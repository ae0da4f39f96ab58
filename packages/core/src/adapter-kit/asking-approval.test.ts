import { describe, expect, test } from 'vitest';
import type { Approval } from '../approvals/approvals.js';
import { ApprovalPendingError, ConfigurationError } from '../errors/index.js';
import { type AskingApproval, askingApprovalField } from './asking-approval.js';

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
