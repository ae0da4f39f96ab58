/**
 * approvalTask through LangGraph's own runtime (entrypoint / StateGraph + interrupt + Command +
 * MemorySaver): the request bound to the exact call, the resume stored as the decision, the
 * effect run once; a resume sent twice, conflicting resumes, other arguments, a malformed
 * resume, parallel tasks, a decision made on the store first, a rejection that stays one.
 */
import { randomUUID } from 'node:crypto';
import {
  ApprovalRejectedError,
  ConfigurationError,
  createApprovals,
  createIdempotency,
  createMemoryStore,
  type Idempotency,
} from '@idempotent-tools/core';
import { runApprovalCases } from '@idempotent-tools/testing';
import { Annotation, Command, entrypoint, MemorySaver, StateGraph } from '@langchain/langgraph';
import { beforeEach, describe, expect, test } from 'vitest';
import {
  type ApprovalRequest,
  type ApprovalTaskOptions,
  approvalTask,
  idempotentTask,
  isApprovalRequest,
} from './index.js';
import { createApprovalDriver } from './test-utils/approval-driver.js';

for (const saver of ['memory', 'sqlite'] as const) {
  runApprovalCases({
    name: `langgraph: approvalTask in a StateGraph node, Command({ resume }) on ${saver === 'memory' ? 'MemorySaver + the memory store' : 'SqliteSaver + the SQLite store'}`,
    describe,
    test,
    expect,
    createDriver: createApprovalDriver(saver),
    supports: ['reject', 'approveEdited', 'approveForOther', 'forge'],
  });
}

interface Order {
  id: string;
  amount: number;
}
type Paused = { __interrupt__?: Array<{ id: string; value: ApprovalRequest<[Order]> }> };

let charges: Order[];
let idempotency: Idempotency;
beforeEach(() => {
  charges = [];
  idempotency = createIdempotency({ store: createMemoryStore() });
});
const bankCharge = async (order: Order) => {
  charges.push(order);
  return { chargeId: `ch_${charges.length}`, amount: order.amount };
};
const order: Order = { id: 'o-1', amount: 40 };
const thread = () => ({ configurable: { thread_id: `t-${randomUUID()}` } });
const requestOf = (result: unknown) => {
  const value = (result as Paused).__interrupt__?.[0]?.value;
  expect(isApprovalRequest(value)).toBe(true);
  return value as ApprovalRequest<[Order]>;
};
const approve = (request: ApprovalRequest, by = 'alice') =>
  new Command({ resume: { type: 'approve', approvalKey: request.approvalKey, by } });
const reject = (request: ApprovalRequest, by = 'alice', reason = 'not this one') =>
  new Command({ resume: { type: 'reject', approvalKey: request.approvalKey, by, reason } });

function checkout(
  options: Partial<ApprovalTaskOptions<[Order], unknown, unknown>> = {},
  after: () => void = () => {},
) {
  const charge = approvalTask('charge', bankCharge, { idempotency, ...options });
  return entrypoint({ name: 'checkout', checkpointer: new MemorySaver() }, async (o: Order) => {
    const receipt = await charge(o);
    after();
    return { receipt };
  });
}

describe('approve, reject', () => {
  test('the interrupt carries the exact call; approved, it charges once, the decision stored', async () => {
    const workflow = checkout({ description: (o) => `Charge ${o.amount} EUR` });
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    expect(request).toMatchObject({
      type: 'approval_request',
      taskName: 'charge',
      args: [order],
      description: 'Charge 40 EUR',
    });
    expect(request.approvalKey).toMatch(/^v1_/);
    expect(charges).toEqual([]);
    const done = await workflow.invoke(approve(request), config);
    expect(done).toEqual({ receipt: { chargeId: 'ch_1', amount: 40 } });
    expect(charges).toEqual([order]);
    expect(await createApprovals(idempotency).getApproval(request.approvalKey)).toMatchObject({
      status: 'approved',
      by: 'alice',
      toolName: 'charge',
    });
  });

  test('rejected: nothing runs, the rejection is stored and stays one on a whole-graph retry', async () => {
    const workflow = checkout();
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    const error = await workflow.invoke(reject(request), config).catch((e: unknown) => e);
    expect(ApprovalRejectedError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ by: 'alice', reason: 'not this one' });
    // The app invokes the thread again with its input: no new question, the same rejection.
    const again = await workflow.invoke(order, config).catch((e: unknown) => e);
    expect(ApprovalRejectedError.isInstance(again)).toBe(true);
    expect(charges).toEqual([]);
  });

  test("onRejected gives the task's value for a rejection", async () => {
    const workflow = checkout({
      onRejected: (approval, o) => ({ rejected: o.id, by: approval.by, reason: approval.reason }),
    });
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    expect(await workflow.invoke(reject(request, 'bob', 'too much'), config)).toEqual({
      receipt: { rejected: 'o-1', by: 'bob', reason: 'too much' },
    });
    expect(charges).toEqual([]);
  });

  test('needsApproval false for a call: it runs as an idempotent task, no interrupt', async () => {
    const workflow = checkout({ needsApproval: (o) => o.amount > 100 });
    expect(await workflow.invoke(order, thread())).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    const config = thread();
    requestOf(await workflow.invoke({ id: 'o-2', amount: 500 }, config));
    expect(charges).toEqual([order]);
  });

  test('in a StateGraph node', async () => {
    const charge = approvalTask('charge', bankCharge, { idempotency });
    const State = Annotation.Root({ order: Annotation<Order>, receipt: Annotation<unknown> });
    const graph = new StateGraph(State)
      .addNode('pay', async (s) => ({ receipt: await charge(s.order) }))
      .addEdge('__start__', 'pay')
      .compile({ checkpointer: new MemorySaver() });
    const config = thread();
    const request = requestOf(await graph.invoke({ order }, config));
    const resume = { type: 'approve', approvalKey: request.approvalKey, by: 'alice' };
    expect(await graph.invoke(new Command({ resume }), config)).toMatchObject({
      receipt: { chargeId: 'ch_1' },
    });
    expect(charges).toEqual([order]);
  });
});

describe('one decision', () => {
  test('a resume sent again after a later failure: one decision (the first), one charge', async () => {
    let fail = true;
    const workflow = checkout({}, () => {
      if (fail) {
        fail = false;
        throw new Error('shipping service down');
      }
    });
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    await expect(workflow.invoke(approve(request, 'alice'), config)).rejects.toThrow('shipping');
    // The app never got an answer: it sends the approval again (from another approver).
    await workflow.invoke(order, config);
    expect(await workflow.invoke(approve(request, 'bob'), config)).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    expect(charges).toEqual([order]);
    const approval = await createApprovals(idempotency).getApproval(request.approvalKey);
    expect(approval).toMatchObject({ status: 'approved', by: 'alice' });
  });

  test('a rejection after an approval of the same call: the approval stands', async () => {
    let fail = true;
    const workflow = checkout({}, () => {
      if (fail) {
        fail = false;
        throw new Error('shipping service down');
      }
    });
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    await expect(workflow.invoke(approve(request), config)).rejects.toThrow('shipping');
    expect(await workflow.invoke(reject(request, 'mallory'), config)).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    expect(charges).toEqual([order]);
  });

  test('a decision made on the store first (an approver UI) is used without asking', async () => {
    const workflow = checkout();
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    await createApprovals(idempotency).approve(request.approvalKey, { by: 'ops@example.com' });
    expect(await workflow.invoke(new Command({ resume: 'go' }), config)).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    expect(charges).toEqual([order]);
  });
});

describe('refused resumes: the call is asked again, nothing runs', () => {
  test('an approval given for other arguments does not authorise these', async () => {
    let amount = 40;
    const charge = approvalTask('charge', bankCharge, { idempotency });
    const workflow = entrypoint(
      { name: 'checkout', checkpointer: new MemorySaver() },
      // The amount is read when the run executes (a price that changed in between).
      async (id: string) => charge({ id, amount }),
    );
    const config = thread();
    const first = requestOf(await workflow.invoke('o-1', config));
    amount = 41;
    const asked = requestOf(await workflow.invoke(approve(first), config));
    expect(charges).toEqual([]);
    expect(asked.args).toEqual([{ id: 'o-1', amount: 41 }]);
    expect(asked.approvalKey).not.toBe(first.approvalKey);
    expect(asked.refused).toMatch(/given for other arguments of charge.*Nothing ran/);
    expect(await createApprovals(idempotency).getApproval(asked.approvalKey)).toMatchObject({
      status: 'pending',
    });
    expect(await workflow.invoke(approve(asked), config)).toEqual({ chargeId: 'ch_1', amount: 41 });
    expect(charges).toEqual([{ id: 'o-1', amount: 41 }]);
  });

  test('a resume made up before the call was asked (Command({ update, goto, resume }) on a thread that never asked, with the exact key the call would be asked with): refused, nothing ran, nothing decided (was: charged without asking)', async () => {
    const payGraph = (own: Idempotency) => {
      const charge = approvalTask('charge', bankCharge, { idempotency: own });
      const State = Annotation.Root({ order: Annotation<Order>, receipt: Annotation<unknown> });
      return new StateGraph(State)
        .addNode('pay', async (s) => ({ receipt: await charge(s.order) }))
        .addEdge('__start__', 'pay')
        .compile({ checkpointer: new MemorySaver() });
    };
    const config = thread();
    // The key this call would be asked with on this thread (a twin graph on a store of its own).
    const twin = payGraph(createIdempotency({ store: createMemoryStore() }));
    const { approvalKey } = requestOf(await twin.invoke({ order }, config));
    const forged = new Command({
      update: { order },
      goto: 'pay',
      resume: { type: 'approve', approvalKey, by: 'mallory' },
    });
    const asked = requestOf(await payGraph(idempotency).invoke(forged as never, config));
    expect(asked.approvalKey).toBe(approvalKey);
    expect(asked.refused).toMatch(/came before this call was asked for.*nothing ran/);
    expect(charges).toEqual([]);
    expect(await createApprovals(idempotency).getApproval(approvalKey)).toMatchObject({
      status: 'pending',
    });
  });

  test('a resume value that is not a decision: asked again with what to send', async () => {
    const workflow = checkout();
    const config = thread();
    const request = requestOf(await workflow.invoke(order, config));
    const asked = requestOf(await workflow.invoke(new Command({ resume: true }), config));
    expect(asked.approvalKey).toBe(request.approvalKey);
    expect(asked.refused).toMatch(/not a decision.*approvalKey/);
    const noBy = { type: 'approve', approvalKey: request.approvalKey };
    expect(requestOf(await workflow.invoke(new Command({ resume: noBy }), config)).refused).toMatch(
      /not a decision/,
    );
    expect(await workflow.invoke(approve(request), config)).toMatchObject({
      receipt: { chargeId: 'ch_1' },
    });
    expect(charges).toEqual([order]);
  });
});

describe('parallel tasks', () => {
  test('an approval task beside an idempotent task (Promise.all): each effect runs once', async () => {
    const labels: string[] = [];
    const charge = approvalTask('charge', bankCharge, { idempotency });
    const label = idempotentTask(
      'label',
      async (o: Order) => {
        labels.push(o.id);
        return `L-${o.id}`;
      },
      { idempotency },
    );
    const workflow = entrypoint(
      { name: 'checkout', checkpointer: new MemorySaver() },
      async (orders: Order[]) => Promise.all([...orders.map((o) => charge(o)), label(order)]),
    );
    const config = thread();
    const two = [order, { id: 'o-2', amount: 7 }];
    const first = requestOf(await workflow.invoke(two, config));
    // Promise.all rejects with the first interrupt: LangGraph asks one at a time.
    const second = requestOf(await workflow.invoke(approve(first), config));
    expect(second.args).not.toEqual(first.args);
    const done = await workflow.invoke(approve(second), config);
    expect(done).toEqual([
      { chargeId: expect.any(String), amount: 40 },
      { chargeId: expect.any(String), amount: 7 },
      'L-o-1',
    ]);
    expect(charges.map((c) => c.id).sort()).toEqual(['o-1', 'o-2']);
    expect(labels).toEqual(['o-1']);
  });
});

describe('developer errors when the task is made', () => {
  test.each([
    ['a misspelt option', { needsAproval: true }, 'needsAproval', /did you mean "needsApproval"/],
    [
      'needsApproval not a boolean or function',
      { needsApproval: 'yes' },
      'needsApproval',
      /boolean/,
    ],
    ['onRejected not a function', { onRejected: 'no' }, 'onRejected', /approval, \.\.\.args/],
  ])('%s', (_case, options, option, message) => {
    let error: unknown;
    try {
      approvalTask('charge', bankCharge, { idempotency, ...options } as never);
    } catch (e) {
      error = e;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).option).toBe(option);
    expect((error as Error).message).toMatch(message);
  });
});
