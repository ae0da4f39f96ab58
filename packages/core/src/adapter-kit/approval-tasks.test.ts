import { describe, expect, test } from 'vitest';
import { createApprovals } from '../approvals/approvals.js';
import { ApprovalRejectedError, ConfigurationError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';
import { type ApprovalRequest, createApprovalTask, isApprovalRequest } from './approval-tasks.js';

type Info = { thread: string };

/** An engine that stops the run at a pause unless it was resumed with a value for that pause. */
class Stop extends Error {}
function engine() {
  const resumes: unknown[] = [];
  const asked: ApprovalRequest[] = [];
  let index = 0;
  return {
    asked,
    resume: (value: unknown) => resumes.push(value),
    /** One run from its start: every pause takes the next resume value, or stops. */
    start: () => {
      index = 0;
    },
    pause(request: ApprovalRequest) {
      asked.push(request);
      if (index < resumes.length) return resumes[index++];
      throw new Stop('paused');
    },
    stops: (error: unknown) => error instanceof Stop,
  };
}

function setup(options: Record<string, unknown> = {}) {
  const idempotency = createIdempotency({ store: createMemoryStore() });
  const run = engine();
  const charges: number[] = [];
  const charge = (cents: number) => {
    charges.push(cents);
    return { id: `ch_${charges.length}`, cents };
  };
  const task = createApprovalTask<Info, [number], { id: string; cents: number }, string>(
    charge,
    { idempotency, ...options } as never,
    {
      caller: 'approvalTask',
      name: 'charge',
      conversation: (info) => info.thread,
      transcript: () => [{ role: 'user', content: 'run' }],
      howTo: 'the thread',
      pause: (request) => run.pause(request),
      stops: run.stops,
      resume: (decision) => `resume(${decision})`,
    },
  );
  const call = async (cents: number) => {
    run.start();
    return task.ask(await task.prepare([cents], { thread: 't1' }));
  };
  return { idempotency, run, charges, call };
}

describe('createApprovalTask: asked first, then run once', () => {
  test('paused with the request; resumed with an approval: runs once; a replay of the run replays', async () => {
    const { run, charges, call } = setup({ description: (cents: number) => `Charge ${cents}?` });
    await expect(call(40)).rejects.toThrow(Stop);
    const [request] = run.asked;
    expect(request).toEqual({
      type: 'approval_request',
      approvalKey: expect.any(String),
      taskName: 'charge',
      args: [40],
      description: 'Charge 40?',
    });
    expect(isApprovalRequest(request)).toBe(true);
    expect(isApprovalRequest({ type: 'approval_request' })).toBe(false);
    run.resume({ type: 'approve', approvalKey: request?.approvalKey, by: 'alice' });
    expect(await call(40)).toEqual({ id: 'ch_1', cents: 40 });
    expect(await call(40)).toEqual({ id: 'ch_1', cents: 40 });
    expect(charges).toEqual([40]);
  });

  test('a resume value that is no decision: asked again with refused, saying how to resume', async () => {
    const { run, charges, call } = setup();
    await expect(call(40)).rejects.toThrow(Stop);
    run.resume({ type: 'approve', by: '' });
    await expect(call(40)).rejects.toThrow(Stop);
    const again = run.asked.at(-1);
    expect(again?.refused).toMatch(/is not a decision: nothing ran.*Resume with resume\(\{ type:/);
    expect(charges).toEqual([]);
  });

  test('a rejection: ApprovalRejectedError, or the value of onRejected; nothing ran', async () => {
    const rejected = setup();
    await expect(rejected.call(40)).rejects.toThrow(Stop);
    const key = rejected.run.asked[0]?.approvalKey;
    rejected.run.resume({ type: 'reject', approvalKey: key, by: 'bob', reason: 'no' });
    const error = await rejected.call(40).catch((e: unknown) => e);
    expect(ApprovalRejectedError.isInstance(error)).toBe(true);
    const handled = setup({
      onRejected: (approval: { by: string }) => `rejected by ${approval.by}`,
    });
    await expect(handled.call(40)).rejects.toThrow(Stop);
    const asked = handled.run.asked[0]?.approvalKey;
    handled.run.resume({ type: 'reject', approvalKey: asked, by: 'bob' });
    expect(await handled.call(40)).toBe('rejected by bob');
    expect([...rejected.charges, ...handled.charges]).toEqual([]);
  });

  test('needsApproval false: runs as a task; a decision made on the store first: no pause', async () => {
    const plain = setup({ needsApproval: (cents: number) => cents > 100 });
    expect(await plain.call(40)).toEqual({ id: 'ch_1', cents: 40 });
    expect(plain.run.asked).toEqual([]);
    const first = setup();
    await expect(first.call(7)).rejects.toThrow(Stop);
    const key = first.run.asked[0]?.approvalKey as string;
    await createApprovals(first.idempotency).approve(key, { by: 'alice' });
    expect(await first.call(7)).toEqual({ id: 'ch_1', cents: 7 });
    expect(first.run.asked).toHaveLength(1);
  });

  test('bad options: refused when made, naming the option', () => {
    for (const [options, option] of [
      [{ needsApproval: 'yes' }, 'needsApproval'],
      [{ description: 5 }, 'description'],
      [{ onRejected: 'no' }, 'onRejected'],
      [{ needsAproval: true }, 'needsAproval'],
    ] as const) {
      let error: unknown;
      try {
        setup(options);
      } catch (e) {
        error = e;
      }
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).option).toBe(option);
    }
  });
});
