/**
 * idempotentTask through LangGraph's own runtime (entrypoint / StateGraph + task + interrupt +
 * MemorySaver): resumes, whole-graph retries, subgraphs, positions, finished runs, and the
 * identity cases for threads (`runTurnIdentityCases` over a chat whose runs are threads' runs).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  currentExecutionContext,
  DriftError,
  type Idempotency,
  type IdempotencyEvent,
} from '@idempotent-tools/core';
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import {
  Annotation,
  type BaseCheckpointSaver,
  Command,
  entrypoint,
  interrupt,
  MemorySaver,
  StateGraph,
  task,
} from '@langchain/langgraph';
import { afterAll, beforeEach, describe, expect, test } from 'vitest';
import { idempotentTask } from './index.js';
import { openSqliteSaver } from './test-utils/node-sqlite-saver.js';
import { createTaskDriver } from './test-utils/task-driver.js';

for (const saver of ['memory', 'sqlite'] as const) {
  runTurnIdentityCases({
    name: `langgraph: idempotentTask in an entrypoint, threads on ${saver === 'memory' ? 'MemorySaver + the memory store' : 'SqliteSaver + the SQLite store (every other run that returns nothing in another process)'}`,
    describe,
    test,
    expect,
    createDriver: createTaskDriver(saver),
    supports: { methods: ['sayReturningNothing'] },
  });
}

interface Order {
  id: string;
  amount: number;
}

/** The vendor: every charge it took, in order. */
let charges: Order[];
let events: IdempotencyEvent[];
let idempotency: Idempotency;
beforeEach(() => {
  charges = [];
  events = [];
  idempotency = createIdempotency({
    store: createMemoryStore(),
    onEvent: (e) => void events.push(e),
  });
});

const bankCharge = async (order: Order) => {
  charges.push(order);
  return { chargeId: `ch_${charges.length}`, amount: order.amount };
};
const chargeTask = (options: Parameters<typeof idempotentTask>[2] = { idempotency }) =>
  idempotentTask('charge', bankCharge, options as never);
const order: Order = { id: 'o-1', amount: 40 };
/** A subgraph that keeps its state on the parent's checkpointer (LangGraph takes `true`; its
 * `EntrypointOptions` type names only a saver). */
const ownState = true as unknown as BaseCheckpointSaver;
const thread = () => ({ configurable: { thread_id: `t-${randomUUID()}` } });
const outcomes = () => events.map((e) => e.outcome);

/** A checkout whose shipping fails the first `failures` times (a failure later in the graph). */
function flakyCheckout(charge: (o: Order) => Promise<unknown>, failures = 1) {
  let left = failures;
  return entrypoint({ name: 'checkout', checkpointer: new MemorySaver() }, async (o: Order) => {
    const receipt = await charge(o);
    if (left-- > 0) throw new Error('shipping service down');
    return { receipt };
  });
}

describe('resume after an interrupt', () => {
  test('an approval interrupt before the charge, resumed: one charge, its receipt returned', async () => {
    const charge = chargeTask();
    const workflow = entrypoint(
      { name: 'w', checkpointer: new MemorySaver() },
      async (o: Order) => {
        const approved = interrupt({ approve: o });
        return approved === true ? { receipt: await charge(o) } : { rejected: true };
      },
    );
    const config = thread();
    const paused = await workflow.invoke(order, config);
    expect(paused).toMatchObject({ __interrupt__: [{ value: { approve: order } }] });
    expect(charges).toEqual([]);
    const done = await workflow.invoke(new Command({ resume: true }), config);
    expect(done).toEqual({ receipt: { chargeId: 'ch_1', amount: 40 } });
    expect(charges).toEqual([order]);
  });

  test('an interrupt inside the idempotent task, before its effect: the resumed task charges once', async () => {
    const charge = idempotentTask(
      'charge',
      async (o: Order) => (interrupt({ confirm: o.id }) === true ? bankCharge(o) : null),
      { idempotency },
    );
    const workflow = entrypoint({ name: 'w', checkpointer: new MemorySaver() }, (o: Order) =>
      charge(o),
    );
    const config = thread();
    await workflow.invoke(order, config);
    expect(charges).toEqual([]);
    expect(await workflow.invoke(new Command({ resume: true }), config)).toEqual({
      chargeId: 'ch_1',
      amount: 40,
    });
    expect(charges).toEqual([order]);
  });

  test('the charge in its own task, the interrupt after it in the calling task: one charge', async () => {
    const charge = chargeTask();
    const chargeThenConfirm = task('chargeThenConfirm', async (o: Order) => {
      const receipt = await charge(o);
      return { receipt, note: interrupt('note for the receipt?') };
    });
    const workflow = entrypoint({ name: 'w', checkpointer: new MemorySaver() }, (o: Order) =>
      chargeThenConfirm(o),
    );
    const config = thread();
    await workflow.invoke(order, config);
    const done = await workflow.invoke(new Command({ resume: 'thanks' }), config);
    expect(done).toEqual({ receipt: { chargeId: 'ch_1', amount: 40 }, note: 'thanks' });
    expect(charges).toEqual([order]);
  });
});

describe('a whole-graph retry after a failure later in the graph', () => {
  test('invoked again with its input: the finished charge is replayed, not run again', async () => {
    const workflow = flakyCheckout(chargeTask());
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow('shipping service down');
    expect(await workflow.invoke(order, config)).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    expect(charges).toEqual([order]);
    expect(outcomes()).toEqual(['executed', 'replayed']);
  });

  test('the same workflow with a plain task() charges twice (what idempotentTask prevents)', async () => {
    const workflow = flakyCheckout(task('charge', bankCharge));
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow('shipping service down');
    await workflow.invoke(order, config);
    expect(charges).toEqual([order, order]);
  });

  test("resumed with invoke(null) (LangGraph's own retry of the failed run): one charge", async () => {
    const workflow = flakyCheckout(chargeTask());
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow('shipping service down');
    expect(await workflow.invoke(null, config)).toEqual({
      receipt: { chargeId: 'ch_1', amount: 40 },
    });
    expect(charges).toEqual([order]);
  });

  test('a subgraph that charged, the parent failing later, retried: one charge', async () => {
    const charge = chargeTask();
    const pay = entrypoint({ name: 'pay', checkpointer: ownState }, (o: Order) => charge(o));
    const runPay = task('runPay', (o: Order) => pay.invoke(o));
    let fail = true;
    const workflow = entrypoint(
      { name: 'w', checkpointer: new MemorySaver() },
      async (o: Order) => {
        const direct = await pay.invoke(o);
        const viaTask = await runPay({ ...o, id: 'o-2' });
        if (fail) {
          fail = false;
          throw new Error('shipping service down');
        }
        return [direct, viaTask];
      },
    );
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow('shipping service down');
    expect(await workflow.invoke(order, config)).toEqual([
      { chargeId: 'ch_1', amount: 40 },
      { chargeId: 'ch_2', amount: 40 },
    ]);
    expect(charges.map((c) => c.id)).toEqual(['o-1', 'o-2']);
  });
});

describe('positions: a deliberate second call is not a retry', () => {
  test('two calls with the same args in one run charge twice; a retry of the run replays both', async () => {
    const charge = chargeTask();
    let fail = true;
    const workflow = entrypoint(
      { name: 'w', checkpointer: new MemorySaver() },
      async (o: Order) => {
        const first = await charge(o);
        const second = await charge(o); // the customer asked for two
        if (fail) {
          fail = false;
          throw new Error('shipping service down');
        }
        return [first, second];
      },
    );
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow();
    expect(await workflow.invoke(order, config)).toEqual([
      { chargeId: 'ch_1', amount: 40 },
      { chargeId: 'ch_2', amount: 40 },
    ]);
    expect(charges).toEqual([order, order]);
  });

  test('two identical calls started in one step (Promise.all) charge twice', async () => {
    const charge = chargeTask();
    const workflow = entrypoint({ name: 'w', checkpointer: new MemorySaver() }, (o: Order) =>
      Promise.all([charge(o), charge(o)]),
    );
    const result = await workflow.invoke(order, thread());
    expect(result.map((r) => r.chargeId).sort()).toEqual(['ch_1', 'ch_2']);
    expect(charges).toHaveLength(2);
  });

  test('one subgraph invoked twice in a run charges twice', async () => {
    const charge = chargeTask();
    const pay = entrypoint({ name: 'pay', checkpointer: ownState }, (o: Order) => charge(o));
    const workflow = entrypoint(
      { name: 'w', checkpointer: new MemorySaver() },
      async (o: Order) => [await pay.invoke(o), await pay.invoke(o)],
    );
    await workflow.invoke(order, thread());
    expect(charges).toEqual([order, order]);
  });
});

describe('identity cases, for threads', () => {
  const once = (charge = chargeTask()) =>
    entrypoint({ name: 'w', checkpointer: new MemorySaver() }, (o: Order) => charge(o));

  test('two threads, same args: two charges', async () => {
    const workflow = once();
    await workflow.invoke(order, thread());
    await workflow.invoke(order, thread());
    expect(charges).toEqual([order, order]);
  });

  test('two tenants (scope) on one thread id: two charges', async () => {
    const charge = idempotentTask('charge', bankCharge, {
      idempotency,
      scope: ({ config }) => config.configurable?.tenant as string,
    });
    // Each tenant has a checkpointer of its own; the idempotency store is shared.
    await once(charge).invoke(order, { configurable: { thread_id: 't', tenant: 'acme' } });
    await once(charge).invoke(order, { configurable: { thread_id: 't', tenant: 'globex' } });
    expect(charges).toEqual([order, order]);
  });

  test('no thread id: a ConfigurationError naming thread_id and conversationId, nothing ran', async () => {
    const workflow = entrypoint('w', (o: Order) => chargeTask()(o));
    const error = await workflow.invoke(order).catch((e: unknown) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).message).toMatch(/thread_id.*conversationId/);
    expect(charges).toEqual([]);
  });

  test('the conversationId option stands in for the thread id; without a checkpointer no run can be told from a retry of an earlier one: refused unless turn_id (was: the second run of conversation "a" replayed the charge of the first)', async () => {
    const charge = idempotentTask('charge', bankCharge, {
      idempotency,
      conversationId: ({ config }) => config.configurable?.order_thread as string,
    });
    const workflow = entrypoint('w', (o: Order) => charge(o));
    const error = await workflow
      .invoke(order, { configurable: { order_thread: 'a' } })
      .catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect((error as Error).message).toMatch(/no checkpointer.*Nothing ran.*turn_id/);
    const run = (turn: string) => ({ configurable: { order_thread: 'a', turn_id: turn } });
    await workflow.invoke(order, run('r1'));
    await workflow.invoke(order, run('r1')); // the retry of run r1
    await workflow.invoke(order, run('r2'));
    expect(charges).toEqual([order, order]);
  });

  test('a thread that finished a run, invoked again without turn_id: refused, nothing ran', async () => {
    const workflow = once();
    const config = thread();
    await workflow.invoke(order, config);
    const error = await workflow.invoke(order, config).catch((e: unknown) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect((error as Error).message).toMatch(/already finished a run.*turn_id/);
    expect(charges).toEqual([order]);
  });

  test('the same refusal for a charge inside a subgraph that keeps its own state', async () => {
    const charge = chargeTask();
    const pay = entrypoint({ name: 'pay', checkpointer: ownState }, (o: Order) => charge(o));
    const workflow = entrypoint({ name: 'w', checkpointer: new MemorySaver() }, (o: Order) =>
      pay.invoke(o),
    );
    const config = thread();
    await workflow.invoke(order, config);
    const error = await workflow.invoke(order, config).catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect(charges).toEqual([order]);
  });

  test('a turn_id per run: a new run with the same args charges again, its retry replays', async () => {
    const workflow = flakyCheckout(chargeTask(), 1);
    const threadId = `t-${randomUUID()}`;
    const run = (turn: string) => ({ configurable: { thread_id: threadId, turn_id: turn } });
    await expect(workflow.invoke(order, run('msg-1'))).rejects.toThrow();
    await workflow.invoke(order, run('msg-1')); // the retry of run msg-1
    await workflow.invoke(order, run('msg-2')); // a new run, same words
    expect(charges).toEqual([order, order]);
    expect(outcomes()).toEqual(['executed', 'replayed', 'executed']);
  });

  test('a business key: one charge per order id across threads; other args are drift', async () => {
    const charge = idempotentTask('charge', bankCharge, {
      idempotency,
      businessKey: (o) => o.id,
    });
    const workflow = once(charge);
    const first = await workflow.invoke(order, thread());
    expect(await workflow.invoke(order, thread())).toEqual(first);
    const drift = await workflow.invoke({ ...order, amount: 41 }, thread()).catch((e) => e);
    expect(DriftError.isInstance(drift)).toBe(true);
    expect(charges).toEqual([order]);
  });
});

describe('a finished run, whatever it returned (was: only a run that returned a value counted)', () => {
  test('an entrypoint that returned nothing, invoked again without turn_id: refused, nothing ran again', async () => {
    const charge = chargeTask();
    const workflow = entrypoint(
      { name: 'w', checkpointer: new MemorySaver() },
      async (o: Order) => {
        await charge(o);
      },
    );
    const config = thread();
    expect(await workflow.invoke(order, config)).toBeUndefined();
    const error = await workflow.invoke(order, config).catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect((error as Error).message).toMatch(/already finished a run.*turn_id/);
    expect(charges).toEqual([order]);
  });
});

const sqliteDir = mkdtempSync(join(tmpdir(), 'langgraph-finished-'));
const sqliteSavers: Array<{ close(): void }> = [];
afterAll(() => {
  for (const saver of sqliteSavers) saver.close();
  rmSync(sqliteDir, { recursive: true, force: true });
});
const sqliteSaver = () => {
  const saver = openSqliteSaver(join(sqliteDir, `${randomUUID()}.db`));
  sqliteSavers.push(saver);
  return saver;
};

describe.each([
  ['MemorySaver', (): BaseCheckpointSaver => new MemorySaver()],
  ['SqliteSaver', (): BaseCheckpointSaver => sqliteSaver()],
])('a StateGraph thread on %s: a finished run is told from a broken one', (_saver, saver) => {
  /** A StateGraph that charges in one node and ships in the next (which fails `failures` times). */
  function checkoutGraph(failures = 0) {
    const charge = chargeTask();
    let left = failures;
    const State = Annotation.Root({ order: Annotation<Order>, receipt: Annotation<unknown> });
    return new StateGraph(State)
      .addNode('pay', async (s) => ({ receipt: await charge(s.order) }))
      .addNode('ship', async () => {
        if (left-- > 0) throw new Error('shipping service down');
        return {};
      })
      .addEdge('__start__', 'pay')
      .addEdge('pay', 'ship')
      .compile({ checkpointer: saver() });
  }

  test('a StateGraph thread that finished a run, invoked again without turn_id: refused, nothing ran again (was: the second charge silently replayed)', async () => {
    const graph = checkoutGraph();
    const config = thread();
    await graph.invoke({ order }, config);
    const error = await graph.invoke({ order }, config).catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect((error as Error).message).toMatch(/already finished a run/);
    expect(charges).toEqual([order]);
  });

  test('a StateGraph run that failed after the charge, invoked again with its input: a retry, replayed; once it finished, another run is refused', async () => {
    const graph = checkoutGraph(1);
    const config = thread();
    await expect(graph.invoke({ order }, config)).rejects.toThrow('shipping service down');
    expect(await graph.invoke({ order }, config)).toMatchObject({ receipt: { chargeId: 'ch_1' } });
    expect(outcomes()).toEqual(['executed', 'replayed']);
    const error = await graph.invoke({ order }, config).catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect(charges).toEqual([order]);
  });

  test('a StateGraph run that failed, resumed with invoke(null), then run again with its input after failing once more: still the one run, one charge', async () => {
    const graph = checkoutGraph(2);
    const config = thread();
    await expect(graph.invoke({ order }, config)).rejects.toThrow('shipping service down');
    await expect(graph.invoke(null, config)).rejects.toThrow('shipping service down');
    await graph.invoke({ order }, config);
    expect(charges).toEqual([order]);
  });

  test('a StateGraph state edited between two runs (updateState): whether the run before finished cannot be told, refused', async () => {
    const graph = checkoutGraph(1);
    const config = thread();
    await expect(graph.invoke({ order }, config)).rejects.toThrow('shipping service down');
    await graph.updateState(config, { receipt: null });
    const error = await graph.invoke({ order }, config).catch((e: unknown) => e);
    expect((error as ConfigurationError).option).toBe('turnId');
    expect((error as Error).message).toMatch(/cannot be told \(its state was edited/);
    expect(charges).toEqual([order]);
  });
});

describe('the task function', () => {
  test('gets the call key (currentExecutionContext) for the vendor, the same on a retry', async () => {
    const keys: string[] = [];
    const charge = idempotentTask(
      'charge',
      async (o: Order) => {
        keys.push(currentExecutionContext()?.key as string);
        if (keys.length === 1) throw new Error('bank timeout before the request');
        return bankCharge(o);
      },
      { idempotency },
    );
    const workflow = flakyCheckout(charge, 0);
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow('bank timeout');
    await workflow.invoke(order, config);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^v1_/);
    expect(keys[1]).toBe(keys[0]);
    expect(charges).toEqual([order]);
  });

  test('a replay returns the JSON round trip of the first value', async () => {
    const charge = idempotentTask(
      'charge',
      async (o: Order) => ({ ...(await bankCharge(o)), at: new Date(0) }),
      { idempotency },
    );
    const workflow = flakyCheckout(charge);
    const config = thread();
    await expect(workflow.invoke(order, config)).rejects.toThrow();
    const { receipt } = (await workflow.invoke(order, config)) as { receipt: unknown };
    expect(receipt).toEqual({ chargeId: 'ch_1', amount: 40, at: '1970-01-01T00:00:00.000Z' });
  });
});

describe('developer errors when the task is made', () => {
  const make =
    (options: unknown, name: unknown = 'charge', fn: unknown = bankCharge) =>
    () =>
      idempotentTask(name as string, fn as typeof bankCharge, options as never);

  test.each([
    ['no store', {}, 'store', /exactly one of \{ store \} or \{ idempotency \}/],
    [
      'a misspelt option',
      { store: createMemoryStore(), polcy: {} },
      'polcy',
      /did you mean "policy"/,
    ],
    ['a misspelt policy field', { store: createMemoryStore(), policy: { tl: 1 } }, /tl/, /ttl/],
    [
      'a business key that is not a function',
      { store: createMemoryStore(), businessKey: 'id' },
      'businessKey',
      /function/,
    ],
  ])('%s', (_case, options, option, message) => {
    const error = (() => {
      try {
        make(options)();
      } catch (e) {
        return e;
      }
    })();
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect((error as ConfigurationError).option).toMatch(option);
    expect((error as Error).message).toMatch(message);
  });

  test('a task name providers would not take, and a missing function', () => {
    expect(make({ idempotency }, 'charge card')).toThrow(/not a tool name/);
    expect(make({ idempotency }, 'charge', 'nope')).toThrow(/fn must be the task's function/);
  });
});
