import { describe, expect, test } from 'vitest';
import {
  ApprovalConflictError,
  ApprovalPendingError,
  ApprovalRejectedError,
  DriftError,
  InvalidInputError,
} from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { errorForModel } from '../model-output.js';
import { createMemoryStore } from '../store/memory-store.js';
import { type AskApproval, createApprovals } from './approvals.js';

function setup(now?: () => number) {
  const store = createMemoryStore(now === undefined ? {} : { now });
  const idempotency = createIdempotency({ store });
  const approvals = createApprovals(idempotency);
  const refunds: string[] = [];
  const refund = async ({ order }: { order: string }) => {
    refunds.push(order);
    return { refunded: order };
  };
  return { store, idempotency, approvals, refunds, refund };
}

const call = (order = '42', turnId = 'turn-1') => ({
  toolName: 'refund',
  turnId,
  scope: 'acme',
  args: { order },
});

describe('requestApproval', () => {
  test('stores one pending request per exact call; asking again returns it', async () => {
    const { approvals } = setup();
    const first = await approvals.requestApproval(call());
    expect(first).toMatchObject({ status: 'pending', toolName: 'refund', scope: 'acme' });
    expect(first.key).toMatch(/^v1_[A-Za-z0-9_-]{43}$/);
    const again = await approvals.requestApproval(call());
    expect(again).toEqual(first);
    expect(approvals.keyOf(call())).toBe(first.key);
    // Other args, another turn, another scope: another approval.
    const keys = new Set([
      first.key,
      (await approvals.requestApproval(call('43'))).key,
      (await approvals.requestApproval(call('42', 'turn-2'))).key,
      (await approvals.requestApproval({ ...call(), scope: 'globex' })).key,
    ]);
    expect(keys.size).toBe(4);
  });

  test('concurrent requests of one call make one request', async () => {
    const { approvals } = setup();
    const all = await Promise.all(
      Array.from({ length: 20 }, () => approvals.requestApproval(call())),
    );
    expect(new Set(all.map((a) => `${a.key}|${a.requestedAt}`)).size).toBe(1);
  });

  test('a ref pins the args: the same ref with other args is DriftError', async () => {
    const { approvals } = setup();
    await approvals.requestApproval(call('42'), { ref: 'call_1' });
    await expect(approvals.requestApproval(call('42'), { ref: 'call_1' })).resolves.toMatchObject({
      status: 'pending',
    });
    const drift = await approvals.requestApproval(call('99'), { ref: 'call_1' }).catch((e) => e);
    expect(DriftError.isInstance(drift)).toBe(true);
    expect(drift.message).toMatch(/other arguments/);
    expect(errorForModel(drift)?.next).toBe('change-arguments');
  });

  test('a business-key tool: the approval is per business key, other args drift', async () => {
    const { approvals } = setup();
    const policy = { businessKey: (a: { order: string; amount: number }) => a.order };
    const base = { toolName: 'refund', scope: 'acme' };
    await approvals.requestApproval({ ...base, args: { order: '42', amount: 10 } }, { policy });
    const drift = await approvals
      .requestApproval({ ...base, args: { order: '42', amount: 99 } }, { policy })
      .catch((e) => e);
    expect(DriftError.isInstance(drift)).toBe(true);
  });
});

describe('approve / reject', () => {
  test('the first decision wins; the same decision twice is one decision', async () => {
    const { approvals } = setup();
    const { key } = await approvals.requestApproval(call());
    const approved = await approvals.approve(key, { by: 'alice' });
    expect(approved).toMatchObject({ status: 'approved', by: 'alice' });
    // Sent again (a lost reply, a double click, another approver): the stored decision.
    expect(await approvals.approve(key, { by: 'alice' })).toEqual(approved);
    expect(await approvals.approve(key, { by: 'bob' })).toEqual(approved);
    const conflict = await approvals.reject(key, { by: 'bob', reason: 'no' }).catch((e) => e);
    expect(ApprovalConflictError.isInstance(conflict)).toBe(true);
    expect(conflict).toMatchObject({ decided: 'approved', by: 'alice' });
    expect(await approvals.getApproval(key)).toEqual(approved);
  });

  test('concurrent opposite decisions: exactly one stands', async () => {
    const { approvals } = setup();
    const { key } = await approvals.requestApproval(call());
    const results = await Promise.allSettled([
      ...Array.from({ length: 5 }, (_, i) => approvals.approve(key, { by: `a${i}` })),
      ...Array.from({ length: 5 }, (_, i) => approvals.reject(key, { by: `r${i}` })),
    ]);
    const stood = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
    const refused = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
    expect(new Set(stood.map((a) => `${a.status}|${a.by}`)).size).toBe(1);
    expect(stood.length + refused.length).toBe(10);
    expect(refused.every((e) => ApprovalConflictError.isInstance(e))).toBe(true);
    expect(stood.length).toBe(5);
  });

  test('a rejection keeps its reason; approving it after is refused', async () => {
    const { approvals } = setup();
    const { key } = await approvals.requestApproval(call());
    const rejected = await approvals.reject(key, { by: 'carol', reason: 'not eligible' });
    expect(rejected).toMatchObject({ status: 'rejected', by: 'carol', reason: 'not eligible' });
    const conflict = await approvals.approve(key, { by: 'dave' }).catch((e) => e);
    expect(conflict).toMatchObject({ decided: 'rejected', by: 'carol' });
  });

  test('deciding on a key nobody asked for is refused', async () => {
    const { approvals } = setup();
    const error = await approvals.approve('v1_nothing', { by: 'alice' }).catch((e) => e);
    expect(InvalidInputError.isInstance(error)).toBe(true);
    await expect(approvals.approve('', { by: 'x' })).rejects.toThrow(/key/);
    const { key } = await approvals.requestApproval(call());
    await expect(approvals.approve(key, { by: '' })).rejects.toThrow(/by/);
  });
});

describe('run: the tool runs once, after approval, for the approved args only', () => {
  test('pending -> ApprovalPendingError (asked), approved -> runs once, then replays', async () => {
    const { approvals, refunds, refund } = setup();
    const pending = await approvals.run(call(), refund).catch((e) => e);
    expect(ApprovalPendingError.isInstance(pending)).toBe(true);
    expect(errorForModel(pending)?.next).toBe('retry-later');
    expect(refunds).toEqual([]);
    await approvals.approve(pending.approvalKey, { by: 'alice' });
    const first = await approvals.run(call(), refund);
    expect(first).toMatchObject({ value: { refunded: '42' }, replayed: false });
    expect(first.approval).toMatchObject({ status: 'approved', by: 'alice' });
    const again = await approvals.run(call(), refund);
    expect(again).toMatchObject({ value: { refunded: '42' }, replayed: true });
    expect(refunds).toEqual(['42']);
  });

  test('approved calls racing in several "processes" (executors on one store) run once', async () => {
    const { store, approvals: asker, refunds, refund } = setup();
    const { key } = await asker.requestApproval(call());
    await asker.approve(key, { by: 'alice' });
    const workers = Array.from({ length: 8 }, () => createApprovals(createIdempotency({ store })));
    const results = await Promise.all(workers.map((w) => w.run(call(), refund)));
    expect(refunds).toEqual(['42']);
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
  });

  test('rejected -> ApprovalRejectedError on every retry; the tool never runs', async () => {
    const { approvals, refunds, refund } = setup();
    const { key } = await approvals.requestApproval(call());
    await approvals.reject(key, { by: 'carol', reason: 'not eligible' });
    for (let i = 0; i < 2; i++) {
      const error = await approvals.run(call(), refund).catch((e) => e);
      expect(ApprovalRejectedError.isInstance(error)).toBe(true);
      expect(error.message).toMatch(/rejected by carol: not eligible/);
      expect(errorForModel(error)?.next).toBe('do-not-retry');
    }
    expect(refunds).toEqual([]);
  });

  test('an approval never authorises other args', async () => {
    const { approvals, refunds, refund } = setup();
    const { key } = await approvals.requestApproval(call('42'));
    await approvals.approve(key, { by: 'alice' });
    // Other args are another call: not approved.
    const pending = await approvals.run(call('9000'), refund).catch((e) => e);
    expect(ApprovalPendingError.isInstance(pending)).toBe(true);
    // Passing the approval given for 42 along with the call for 9000: DriftError.
    const drift = await approvals
      .run(call('9000'), refund, {}, { approvalKey: key })
      .catch((e) => e);
    expect(DriftError.isInstance(drift)).toBe(true);
    expect(drift.message).toMatch(/other arguments/);
    // An approval key of another tool: refused too.
    const other = await approvals.requestApproval({ ...call(), toolName: 'ship' });
    const wrong = await approvals
      .run(call('42'), refund, {}, { approvalKey: other.key })
      .catch((e) => e);
    expect(InvalidInputError.isInstance(wrong)).toBe(true);
    expect(refunds).toEqual([]);
    // The approved call itself runs, with its own key passed too.
    await approvals.run(call('42'), refund, {}, { approvalKey: key });
    expect(refunds).toEqual(['42']);
  });

  test('business-key tools: the approval of one payload does not authorise another', async () => {
    const { approvals, refund } = setup();
    const policy = { businessKey: (a: { order: string; note?: string }) => a.order };
    const base = { toolName: 'refund', scope: 'acme' };
    const { key } = await approvals.requestApproval({ ...base, args: { order: '42' } }, { policy });
    await approvals.approve(key, { by: 'alice' });
    const drift = await approvals
      .run({ ...base, args: { order: '42', note: 'x' } }, refund, policy)
      .catch((e) => e);
    expect(DriftError.isInstance(drift)).toBe(true);
  });

  test('expiry follows the ttl: a request and its decision go with it', async () => {
    let clock = 1_000_000;
    const { approvals, refunds, refund } = setup(() => clock);
    const policy = { ttl: 60_000 };
    const { key } = await approvals.requestApproval(call(), { policy });
    clock += 61_000;
    expect(await approvals.getApproval(key)).toBeUndefined();
    await expect(approvals.approve(key, { by: 'alice' })).rejects.toThrow(/expired/);
    // Asked again, approved, run: the decision lasts the ttl too.
    await approvals.requestApproval(call(), { policy });
    await approvals.approve(key, { by: 'alice' });
    await approvals.run(call(), refund, policy);
    clock += 61_000;
    const after = await approvals.run(call(), refund, policy).catch((e) => e);
    expect(ApprovalPendingError.isInstance(after)).toBe(true);
    expect(refunds).toEqual(['42']);
  });

  test('HMAC keys: the approval key follows the executor', async () => {
    const store = createMemoryStore();
    const plain = createApprovals(createIdempotency({ store }));
    const keyed = createApprovals(createIdempotency({ store, argsHmacKey: Buffer.alloc(32, 7) }));
    expect(keyed.keyOf(call())).not.toBe(plain.keyOf(call()));
  });

  test('a corrupt approval record is RecordIntegrityError, never approved', async () => {
    const { store, approvals, refunds, refund } = setup();
    const key = approvals.keyOf(call());
    const token = 'garbage';
    await store.claim({ key, fingerprint: 'f', token, leaseMs: 1000, ttlMs: 60_000 });
    await store.complete({ key, token, state: 'completed', outcome: 'not json', ttlMs: 60_000 });
    await expect(approvals.run(call(), refund)).rejects.toMatchObject({ code: 'record_integrity' });
    expect(refunds).toEqual([]);
  });
});

describe('bound approvals for adapters: approveCall, recordAsked, checkAsked', () => {
  const charge = (amount: number) => ({ toolName: 'charge', turnId: 't1', args: { amount } });

  test('approveCall: the request made under its ref and approved; sent again, the one approval; a standing rejection stays', async () => {
    const approvals = createApprovals(createIdempotency({ store: createMemoryStore() }));
    const first = await approvals.approveCall(charge(5), { ref: 'call_1', by: 'sdk:call_1' });
    expect(first).toMatchObject({ status: 'approved', by: 'sdk:call_1' });
    const again = await approvals.approveCall(charge(5), { ref: 'call_1', by: 'sdk:again' });
    expect(again).toMatchObject({ status: 'approved', by: 'sdk:call_1', key: first.key });
    // The same ref with other arguments (an edited state): refused.
    await expect(approvals.approveCall(charge(500), { ref: 'call_1', by: 'x' })).rejects.toSatisfy(
      DriftError.isInstance,
    );
    const asked = await approvals.requestApproval(charge(7), { ref: 'call_2' });
    await approvals.reject(asked.key, { by: 'alice' });
    await expect(approvals.approveCall(charge(7), { ref: 'call_2', by: 'sdk' })).rejects.toSatisfy(
      ApprovalRejectedError.isInstance,
    );
  });

  test('recordAsked then checkAsked: the call the model emitted passes; other args are drift; a call never asked is refused; nothing else is stored', async () => {
    const approvals = createApprovals(createIdempotency({ store: createMemoryStore() }));
    await approvals.recordAsked(charge(5), 'call_1');
    await approvals.recordAsked(charge(500), 'call_1'); // a resume announcing edited args: ignored
    await expect(approvals.checkAsked(charge(5), 'call_1')).resolves.toBeUndefined();
    await expect(approvals.checkAsked(charge(500), 'call_1')).rejects.toSatisfy(
      DriftError.isInstance,
    );
    const never = await approvals.checkAsked(charge(5), 'made_up').catch((e: unknown) => e);
    expect(InvalidInputError.isInstance(never) && never.field === 'args').toBe(true);
    expect(errorForModel(never)).toMatchObject({ error: 'invalid_input' });
    // The check stored nothing for the made-up ref: asking again is refused again.
    await expect(approvals.checkAsked(charge(5), 'made_up')).rejects.toSatisfy(
      InvalidInputError.isInstance,
    );
  });

  test('approveCall with asked: only the call the model emitted under the ref is approved; other args or a call never asked: nothing is stored', async () => {
    const store = createMemoryStore();
    const approvals = createApprovals(createIdempotency({ store }));
    const emitted = (amount: number) => ({
      toolName: 'charge',
      turnId: 'emitted',
      args: { amount },
    });
    await approvals.recordAsked(emitted(5), 'call_1');
    const records = async () => ((await store.list?.({}))?.records ?? []).length;
    const before = await records();
    await expect(
      approvals.approveCall(charge(500), { ref: 'call_1', by: 'sdk', asked: emitted(500) }),
    ).rejects.toSatisfy(DriftError.isInstance);
    const never = await approvals
      .approveCall(charge(5), { ref: 'made_up', by: 'sdk', asked: emitted(5) })
      .catch((e: unknown) => e);
    expect(InvalidInputError.isInstance(never) && never.field === 'args').toBe(true);
    expect(await records()).toBe(before);
    const approved = await approvals.approveCall(charge(5), {
      ref: 'call_1',
      by: 'sdk:call_1',
      asked: emitted(5),
    });
    expect(approved).toMatchObject({ status: 'approved', by: 'sdk:call_1' });
  });

  test('runAsking: asks only while undecided, stores the answer first, runs once; a standing decision wins', async () => {
    const { approvals, refund, refunds } = setup();
    const asked: Array<string | undefined> = [];
    const answer = (approved: boolean) => async (asking: Parameters<AskApproval>[0]) => {
      asked.push(asking.pending?.status);
      await asking.request();
      return { approved, by: 'alice', reason: approved ? undefined : 'too much' };
    };
    const first = await approvals.runAsking(call('1'), refund, undefined, answer(true));
    expect(first).toMatchObject({ value: { refunded: '1' }, replayed: false });
    expect(first.approval).toMatchObject({ status: 'approved', by: 'alice' });
    const again = await approvals.runAsking(call('1'), refund, undefined, answer(false));
    expect(again.replayed).toBe(true);
    expect(asked).toEqual([undefined]); // decided: nobody is asked again
    // A rejection: stored with its reason, the same on every retry.
    const no = approvals.runAsking(call('2'), refund, undefined, answer(false));
    await expect(no).rejects.toSatisfy(ApprovalRejectedError.isInstance);
    expect(await approvals.getApproval(approvals.keyOf(call('2')))).toMatchObject({
      status: 'rejected',
      reason: 'too much',
    });
    // Decided elsewhere while the person was asked: that decision stands.
    const late = approvals.runAsking(call('3'), refund, undefined, async ({ request }) => {
      const pending = await request();
      await approvals.reject(pending.key, { by: 'bob' });
      return { approved: true, by: 'alice' };
    });
    await expect(late).rejects.toSatisfy(ApprovalRejectedError.isInstance);
    expect(refunds).toEqual(['1']);
  });
});

describe('bound approvals for a run that stops to ask: decideAsked, askInRun', () => {
  const charge = (amount: number) => ({ toolName: 'charge', turnId: 't1', args: { amount } });
  const setupAsk = () => createApprovals(createIdempotency({ store: createMemoryStore() }));
  const stop = new Error('stop the run');

  test('decideAsked: only a call asked under the ref is decided; another approval key is refused; the first decision stands', async () => {
    const approvals = setupAsk();
    const { key } = await approvals.requestApproval(charge(5));
    const approve = { approvalKey: key, status: 'approved' as const, by: 'alice' };
    const early = await approvals.decideAsked(charge(5), approve, 'q0').catch((e: unknown) => e);
    expect(InvalidInputError.isInstance(early) && early.field === 'args').toBe(true);
    expect((early as Error).message).toMatch(/came before this call was asked for.*nothing ran/);
    expect(await approvals.getApproval(key)).toMatchObject({ status: 'pending' });
    await approvals.recordAsked(charge(5), 'q0');
    const other = await approvals.requestApproval(charge(7));
    const wrong = { ...approve, approvalKey: other.key };
    await expect(approvals.decideAsked(charge(5), wrong, 'q0')).rejects.toSatisfy(
      DriftError.isInstance,
    );
    expect(await approvals.decideAsked(charge(5), approve, 'q0')).toMatchObject({
      status: 'approved',
      by: 'alice',
    });
    const reject = { ...approve, status: 'rejected' as const, by: 'bob' };
    expect(await approvals.decideAsked(charge(5), reject, 'q0')).toMatchObject({
      status: 'approved',
      by: 'alice',
    });
  });

  test('askInRun: the stop is recorded; the resumed answer decides; an answer that is no decision asks again with why; decided already: not asked', async () => {
    const approvals = setupAsk();
    let answers: unknown[] = [];
    const asked: Array<string | undefined> = [];
    const run = {
      ask: ({ refused }: { approvalKey: string; refused: string | undefined }) => {
        asked.push(refused);
        if (asked.length > answers.length) throw stop;
        return answers[asked.length - 1];
      },
      stops: (error: unknown) => error === stop,
      decisionOf: (answer: unknown, approvalKey: string) =>
        answer === 'yes'
          ? { approvalKey, status: 'approved' as const, by: 'alice' }
          : 'not a decision',
    };
    await expect(approvals.askInRun(charge(5), run)).rejects.toBe(stop);
    // Resumed: the answers come back in order on every resume.
    answers = ['maybe'];
    asked.length = 0;
    await expect(approvals.askInRun(charge(5), run)).rejects.toBe(stop);
    expect(asked).toEqual([undefined, 'not a decision']);
    answers = ['maybe', 'yes'];
    asked.length = 0;
    expect(await approvals.askInRun(charge(5), run)).toMatchObject({ status: 'approved' });
    asked.length = 0;
    expect(await approvals.askInRun(charge(5), run)).toMatchObject({ status: 'approved' });
    expect(asked).toEqual([]);
  });

  test('askInRun: an answer that reaches a question never put (made up before the run stopped) decides nothing', async () => {
    const approvals = setupAsk();
    const run = {
      ask: ({ approvalKey, refused }: { approvalKey: string; refused: string | undefined }) => {
        if (refused !== undefined) throw stop;
        return { approvalKey };
      },
      stops: (error: unknown) => error === stop,
      decisionOf: (answer: unknown) => ({
        ...(answer as { approvalKey: string }),
        status: 'approved' as const,
        by: 'mallory',
      }),
    };
    await expect(approvals.askInRun(charge(5), run)).rejects.toBe(stop);
    const { key } = await approvals.requestApproval(charge(5));
    expect(await approvals.getApproval(key)).toMatchObject({ status: 'pending' });
  });
});
