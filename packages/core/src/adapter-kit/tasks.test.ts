import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createMemoryStore } from '../store/memory-store.js';
import { createTaskAdapter } from './tasks.js';

type Info = { thread: string };
const spec = {
  caller: 'task',
  name: 'charge',
  conversation: (info: Info) => info.thread,
  transcript: () => [{ role: 'user' as const, content: 'run' }],
  howTo: 'the thread',
};

describe('createTaskAdapter', () => {
  test('a task call: its arguments as they are, once per thread; a business key of the spread arguments', async () => {
    const store = createMemoryStore();
    const charges: unknown[][] = [];
    const charge = (...args: unknown[]) => {
      charges.push(args);
      return charges.length;
    };
    const { prepare, run: runCall } = createTaskAdapter<Info, [Date, number]>(
      charge,
      { store },
      spec,
    );
    const at = new Date(0);
    const run = async (thread: string, args: [Date, number]) =>
      runCall(await prepare(args, { thread }), charge);
    expect(await run('t1', [at, 5])).toBe(1);
    expect(await run('t1', [at, 5])).toBe(1);
    expect(await run('t2', [at, 5])).toBe(2);
    expect(charges[0]?.[0]).toBeInstanceOf(Date);
    const keyed = createTaskAdapter<Info, [string, number]>(
      charge,
      { store, businessKey: (id: string) => id },
      spec,
    );
    const a = await keyed.prepare(['o-1', 5], { thread: 't1' });
    const b = await keyed.prepare(['o-1', 5], { thread: 't2' });
    expect(keyed.adapter.executor.keyOf(a.call, a.policy).key).toBe(
      keyed.adapter.executor.keyOf(b.call, b.policy).key,
    );
  });

  test('a fn or businessKey that is not a function, an option of no task: refused when made', () => {
    const store = createMemoryStore();
    expect(() => createTaskAdapter('nope', { store }, spec)).toThrow(
      /fn must be the task's function/,
    );
    expect(() => createTaskAdapter(() => 1, { store, businessKey: 'id' }, spec)).toThrow(
      ConfigurationError,
    );
    expect(() => createTaskAdapter(() => 1, { store, needsApproval: true }, spec)).toThrow(
      ConfigurationError,
    );
    expect(() =>
      createTaskAdapter(
        () => 1,
        { store, needsApproval: true },
        { ...spec, options: ['needsApproval'] },
      ),
    ).not.toThrow();
  });
});

describe('createTaskAdapter with runs: the turn is the run and the place in it', () => {
  type RunInfo = { thread: string; turn?: string; finished: boolean | string; place: string };
  const runs = {
    finished: (info: RunInfo) => info.finished,
    place: (info: RunInfo) => [info.place],
    tag: ['tt_', 'test/task'] as const,
    runHowTo: 'a run id',
  };
  const runSpec = {
    caller: 'task',
    name: 'charge',
    turn: (info: RunInfo) => info.turn,
    conversation: (info: RunInfo) => info.thread,
    howTo: 'the thread',
    runs,
  };
  const at = (over: Partial<RunInfo> = {}): RunInfo => ({
    thread: 't1',
    finished: false,
    place: 'a',
    ...over,
  });

  test('the first run of a thread: one turn id per place, the prefix of the tag; a run id of its own', async () => {
    const { prepare } = createTaskAdapter<RunInfo, [number]>(
      () => 1,
      { store: createMemoryStore() },
      runSpec,
    );
    const a = await prepare([5], at());
    expect(a.call.turnId).toMatch(/^tt_/);
    expect((await prepare([5], at())).call.turnId).toBe(a.call.turnId);
    expect((await prepare([5], at({ place: 'b' }))).call.turnId).not.toBe(a.call.turnId);
    expect((await prepare([5], at({ thread: 't2' }))).call.turnId).not.toBe(a.call.turnId);
    const own = await prepare([5], at({ turn: 'run-2', finished: true }));
    expect(own.call.turnId).toMatch(/^tt_/);
    expect(own.call.turnId).not.toBe(a.call.turnId);
  });

  test('a thread that finished a run, or cannot tell: refused, naming the thread and what to pass', async () => {
    const { prepare } = createTaskAdapter<RunInfo, [number]>(
      () => 1,
      { store: createMemoryStore() },
      runSpec,
    );
    const refused = async (info: RunInfo) => {
      try {
        await prepare([5], info);
      } catch (error) {
        return error as ConfigurationError;
      }
      throw new Error('not refused');
    };
    const done = await refused(at({ finished: true }));
    expect(ConfigurationError.isInstance(done)).toBe(true);
    expect(done.option).toBe('turnId');
    expect(done.message).toMatch(
      /thread "t1" already finished a run.*Nothing ran\. Pass a run id\./,
    );
    expect((await refused(at({ finished: 'no history' }))).message).toMatch(
      /whether thread "t1" already finished a run cannot be told \(no history\)/,
    );
  });

  test('a business key: the key is the business key, a finished thread is not asked about', async () => {
    const keyed = createTaskAdapter<RunInfo, [string]>(
      () => 1,
      { store: createMemoryStore(), businessKey: (id: string) => id },
      runSpec,
    );
    const a = await keyed.prepare(['o-1'], at({ finished: true }));
    const b = await keyed.prepare(['o-1'], at({ thread: 't2', finished: 'unknown' }));
    expect(keyed.adapter.executor.keyOf(a.call, a.policy).key).toBe(
      keyed.adapter.executor.keyOf(b.call, b.policy).key,
    );
  });
});
