import { describe, expect, test } from 'vitest';
import { createApprovals } from '../approvals/approvals.js';
import { ApprovalConflictError, DriftError, InvalidInputError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createAdapter } from './adapter.js';
import {
  createGatedCalls,
  decidedFirst,
  gatedCallOf,
  policyAsks,
  waitingCall,
} from './gated-calls.js';
import { type PreparedCall, prepareCall } from './pipeline.js';

type Info = { args: unknown };

function setup(gated = true) {
  const adapter = createAdapter<Info>(
    { store: createMemoryStore(), turnId: 't1' },
    { caller: 'test', toolNames: ['pay'], howTo: 'turnId' },
  );
  const approvals = createApprovals(adapter.executor);
  const gate = createGatedCalls(approvals, { toolName: 'pay', policy: undefined, gated });
  const prepare = async (args: unknown) => {
    const prepared = await prepareCall(adapter, {
      toolName: 'pay',
      input: args,
      parsed: true,
      info: (a) => ({ args: a }),
    });
    return (prepared as { prepared: PreparedCall<unknown> }).prepared;
  };
  const own: string[] = [];
  const callbacks = gate.inputCallbacks(
    {
      onInputStart: (o: { toolCallId: string }) => own.push(`start ${o.toolCallId}`),
      onInputAvailable: (o: { toolCallId: string }) => own.push(`available ${o.toolCallId}`),
    },
    (input) => ((input as { cents?: unknown }).cents === 'bad' ? undefined : { args: input }),
  );
  const started = (id: string) => callbacks.onInputStart({ toolCallId: id });
  const announced = (id: string, firstPass: boolean, input: unknown) =>
    callbacks.onInputAvailable({ toolCallId: id, input, messages: firstPass ? [{}] : [] });
  const runs: unknown[] = [];
  const run = async (args: unknown, approved: boolean, ref = 'call_1') =>
    gate.run(adapter as never, await prepare(args), { approved, ref, by: 'gate', args }, () => {
      runs.push(args);
      return { paid: runs.length };
    });
  return { adapter, approvals, gate, prepare, run, runs, started, announced, own };
}

describe('createGatedCalls: a gate before execute, bound to the emitted call', () => {
  test('an approved call the model emitted (seen streaming) runs once, approved on the store', async () => {
    const { run, runs, approvals, prepare, started, announced, own } = setup();
    await started('call_1');
    await announced('call_1', false, { cents: 5 });
    expect(await run({ cents: 5 }, true)).toEqual({ output: { paid: 1 } });
    expect(await run({ cents: 5 }, true)).toEqual({ output: { paid: 1, replayed: true } });
    expect(runs).toHaveLength(1);
    expect(own).toEqual(['start call_1', 'available call_1']);
    const approval = await approvals.getApproval(
      approvals.keyOf((await prepare({ cents: 5 })).call),
    );
    expect(approval).toMatchObject({ status: 'approved', by: 'gate' });
  });

  test('an approval of other arguments than the emitted ones, or of a call never emitted, runs nothing', async () => {
    const { run, runs, announced } = setup();
    await announced('call_1', true, { cents: 5 });
    const edited = await run({ cents: 500 }, true);
    expect('text' in edited && edited.text).toContain('drift');
    const unasked = await run({ cents: 5 }, true, 'call_2');
    expect('output' in unasked).toBe(false);
    expect(runs).toEqual([]);
  });

  test('an announcement that is neither streamed nor of a first pass, or refused, records nothing', async () => {
    const { run, runs, started, announced } = setup();
    await announced('call_1', false, { cents: 5 }); // a resumed run's snapshot
    await started('call_2');
    await announced('call_2', false, { cents: 'bad' }); // the schema refused it
    expect('output' in (await run({ cents: 5 }, true))).toBe(false);
    expect('output' in (await run({ cents: 5 }, true, 'call_2'))).toBe(false);
    expect(runs).toEqual([]);
  });

  test('a run-wide gate (not the tool own) approves without the emitted check; unapproved calls run as usual', async () => {
    const { run, runs } = setup(false);
    expect(await run({ cents: 7 }, true)).toEqual({ output: { paid: 1 } });
    expect(await run({ cents: 8 }, false)).toEqual({ output: { paid: 2 } });
    expect(runs).toHaveLength(2);
  });

  test('the handle: a decision out of the run is stored first and stands; a rejection is refused in the run', async () => {
    const { gate, prepare, run, runs, announced } = setup();
    await announced('call_1', true, { cents: 5 });
    const tool = gate.handle(async (args) =>
      (args as { cents: number }).cents < 0 ? undefined : { args, prepared: await prepare(args) },
    );
    const handle = gatedCallOf(tool);
    expect(handle).toBeDefined();
    expect(gatedCallOf({})).toBeUndefined();
    if (handle === undefined) return;
    await expect(handle.request({ cents: -1 }, {}, 'call_1')).rejects.toThrow(InvalidInputError);
    await expect(handle.request({ cents: 9 }, {}, 'call_1')).rejects.toThrow(DriftError);
    const asked = await handle.request({ cents: 5 }, {}, 'call_1');
    expect(asked.status).toBe('pending');
    const rejected = { decision: 'rejected', by: 'bob', reason: 'no' } as const;
    expect(await handle.decide(asked, rejected)).toMatchObject({ status: 'rejected', by: 'bob' });
    expect(await handle.decide(asked, rejected)).toMatchObject({ status: 'rejected' });
    await expect(handle.decide(asked, { decision: 'approved', by: 'eve' })).rejects.toThrow(
      ApprovalConflictError,
    );
    const outcome = await run({ cents: 5 }, true);
    expect('text' in outcome ? outcome.text : outcome).toContain('rejected');
    expect(runs).toEqual([]);
  });
});

describe('waitingCall: the one call of a suspended run that waits for an approval', () => {
  const calls = [
    { toolCallId: 'a', requiresApproval: true },
    { toolCallId: 'b', requiresApproval: false },
    { toolCallId: 'c', requiresApproval: true },
  ];
  const runs: Record<string, { toolCalls: typeof calls }> = {
    r1: { toolCalls: calls },
    r2: { toolCalls: calls.slice(0, 2) },
  };
  const looked: string[] = [];
  const find = async (id: string) => {
    looked.push(id);
    return runs[id];
  };
  const field = (p: Promise<unknown>) =>
    p.then(
      () => 'no error',
      (error) => (InvalidInputError.isInstance(error) ? error.field : error),
    );

  test('the named one, or the only one, with its run', async () => {
    expect(await waitingCall('r1', find, 'c')).toEqual({ run: runs.r1, call: calls[2] });
    expect((await waitingCall('r2', find, undefined)).call).toBe(calls[0]);
  });

  test('none, several, an unknown run, or no run id (not looked up): InvalidInputError naming the field', async () => {
    looked.length = 0;
    expect(await field(waitingCall('r1', find, undefined))).toBe('toolCallId');
    expect(await field(waitingCall('r1', find, 'b'))).toBe('toolCallId');
    expect(await field(waitingCall('r9', find, undefined))).toBe('toolCallId');
    expect(await field(waitingCall('', find, 'a'))).toBe('runId');
    expect(looked).toEqual(['r1', 'r1', 'r9']);
  });
});

describe('policyAsks: a framework approval policy', () => {
  test('true, or a function saying so (given the args); a throwing function asks', async () => {
    expect(await policyAsks(true)).toBe(true);
    expect(await policyAsks(false)).toBe(false);
    expect(await policyAsks(undefined)).toBe(false);
    const seen: unknown[] = [];
    const big = async (input: { cents: number }, context: unknown) => {
      seen.push(context);
      return input.cents > 100;
    };
    expect(await policyAsks(big, { cents: 500 }, 'ctx')).toBe(true);
    expect(await policyAsks(big, { cents: 5 }, 'ctx')).toBe(false);
    expect(seen).toEqual(['ctx', 'ctx']);
    expect(
      await policyAsks(() => {
        throw new Error('cannot tell');
      }),
    ).toBe(true);
  });
});

describe('decidedFirst: a resume method with the decision stored first', () => {
  test('the decision is recorded before the resume; by is not passed on, a reason only of a rejection', async () => {
    const order: string[] = [];
    const record = async (target: string, options: { decision: string }) => {
      order.push(`record ${target} ${options.decision}`);
    };
    const resume = (target: string, options: object) => {
      order.push(`resume ${target} ${JSON.stringify(options)}`);
      return 'resumed';
    };
    const approve = decidedFirst('approved', record, resume);
    const decline = decidedFirst('rejected', record, resume);
    const options = { runId: 'r1', by: 'alice', reason: 'ok' };
    expect(await approve('agent', options)).toBe('resumed');
    expect(await decline('agent', options)).toBe('resumed');
    expect(order).toEqual([
      'record agent approved',
      'resume agent {"runId":"r1"}',
      'record agent rejected',
      'resume agent {"runId":"r1","reason":"ok"}',
    ]);
  });

  test('a refused decision resumes nothing', async () => {
    let resumed = false;
    const refuse = decidedFirst(
      'approved',
      async () => {
        throw new InvalidInputError({ field: 'toolCallId', message: 'none' });
      },
      () => {
        resumed = true;
      },
    );
    await expect(refuse('agent', { by: 'alice' })).rejects.toThrow(InvalidInputError);
    expect(resumed).toBe(false);
  });
});
