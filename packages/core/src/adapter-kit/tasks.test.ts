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
