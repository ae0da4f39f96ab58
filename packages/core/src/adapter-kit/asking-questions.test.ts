import { describe, expect, test } from 'vitest';
import { type Approval, createApprovals } from '../approvals/approvals.js';
import { ApprovalPendingError, ConfigurationError } from '../errors/index.js';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import { type AskingApproval, askingApprovalField } from './asking-approval.js';
import {
  askByQuestion,
  createAskingAdapter,
  type QuestionChannel,
  runAskingCall,
} from './asking-questions.js';

type Info = { args: Record<string, unknown> };
const approval = askingApprovalField<Info>({ args: (call) => call.args, by: () => 'client' })(
  { message: (call: Info) => `refund ${call.args.order}?` },
  { toolName: 'refund', treatment: 'wrap', caller: 'test' },
) as AskingApproval<Info>;
const call = { args: { order: 7 } };
const pending = { key: 'a_1', toolName: 'refund', status: 'pending' } as Approval;
const accepted = (answer: unknown) =>
  answer === 'yes' ? true : answer === 'no' ? false : undefined;
const channel = (own: Partial<QuestionChannel>): QuestionChannel => ({
  answered: () => undefined,
  canAsk: true,
  round: (key, message) => ({ key, message }),
  accepted,
  refuse: () => new ConfigurationError({ option: 'approval', message: 'cannot ask' }),
  ...own,
});
const request = async () => pending;

describe('askByQuestion', () => {
  test('an answer the request carries to the pending question is the answer', async () => {
    const ask = askByQuestion(
      approval,
      call,
      channel({ answered: (key) => (key === 'a_1' ? 'yes' : undefined) }),
    );
    await expect(ask({ pending, request })).resolves.toEqual({ approved: true, by: 'client' });
  });

  test('pushed: the question asked and its answer; no answer decides nothing', async () => {
    const asked: string[] = [];
    const push = async (message: string) => {
      asked.push(message);
      return 'no';
    };
    const ask = askByQuestion(approval, call, channel({ push }));
    await expect(ask({ pending: undefined, request })).resolves.toMatchObject({ approved: false });
    expect(asked).toEqual(['refund 7?']);
    const lost = askByQuestion(
      approval,
      call,
      channel({ push: () => Promise.reject(new Error('gone')) }),
    );
    await expect(lost({ pending: undefined, request })).rejects.toThrow(ApprovalPendingError);
  });

  test('a round: the question as the reply (after the request is stored); cannot ask: refused', async () => {
    let stored = 0;
    const store = async () => {
      stored++;
      return pending;
    };
    const ask = askByQuestion(approval, call, channel({}));
    const thrown = await ask({
      pending: undefined,
      request: store,
    }).catch((e) => e);
    expect(NotAnOutcome.isInstance(thrown)).toBe(true);
    expect((thrown as NotAnOutcome).value).toEqual({ key: 'a_1', message: 'refund 7?' });
    expect(stored).toBe(1);
    const refused = askByQuestion(approval, call, channel({ canAsk: false }));
    await expect(refused({ pending: undefined, request: store })).rejects.toThrow('cannot ask');
    expect(stored).toBe(1);
  });
});

describe('runAskingCall', () => {
  test('prepared, asked, run once; the stored approval stands for the repeat', async () => {
    const adapter = createAdapter<Info & { turn: string }>(
      { store: createMemoryStore(), turnId: (info: Info & { turn: string }) => info.turn } as never,
      { caller: 'test', howTo: 'turnId' },
    );
    const approvals = createApprovals(adapter.executor);
    let runs = 0;
    let asks = 0;
    const given = {
      toolName: 'refund',
      input: { order: 7 },
      parsed: true,
      info: (args: unknown) => ({ args: args as Info['args'], turn: 't1' }),
    };
    const execute = async () => ++runs;
    const askOf =
      () =>
      async ({ request }: { request: () => Promise<Approval> }) => {
        asks++;
        await request();
        return { approved: true, by: 'client' };
      };
    expect(await runAskingCall(adapter, approvals, given, execute, askOf)).toMatchObject({
      output: expect.anything(),
    });
    expect(await runAskingCall(adapter, approvals, given, execute, askOf)).toMatchObject({
      output: expect.anything(),
    });
    expect([runs, asks]).toEqual([1, 1]);
    const unknown = {
      ...given,
      info: (args: unknown) => ({ args: args as Info['args'], turn: '' }),
    };
    const refused = await runAskingCall(adapter, approvals, unknown, execute, () => undefined);
    expect('output' in refused).toBe(false);
    expect(runs).toBe(1);
  });
});

describe('createAskingAdapter', () => {
  test('the approval field checked, the tools that ask listed, approvals over the executor', () => {
    const options = {
      store: createMemoryStore(),
      turnId: 't',
      policies: { refund: { approval: true }, send: { approval: false }, read: {} },
    };
    const spec = { args: (call: Info) => call.args, by: () => 'client' };
    const asking = createAskingAdapter<Info>(options, { caller: 'test', howTo: 'turnId' }, spec);
    expect(asking.asking).toEqual(['refund']);
    expect(asking.approval('refund')?.timeout).toBe(600_000);
    expect(asking.approval('send')).toBeUndefined();
    expect(typeof asking.approvals.runAsking).toBe('function');
    const bad = { ...options, policies: { refund: { approval: { timeout: -1 } } } };
    expect(() => createAskingAdapter<Info>(bad, { caller: 'test', howTo: 'turnId' }, spec)).toThrow(
      ConfigurationError,
    );
  });
});
