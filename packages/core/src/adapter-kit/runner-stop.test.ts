import { describe, expect, it } from 'vitest';
import { createRunnerStop } from './runner-stop.js';

/** A runner that yields its steps, then ends with the abort error when its signal aborted. */
function runnerOf(signal: AbortSignal) {
  return {
    async *[Symbol.asyncIterator]() {
      yield 1;
      yield 2;
      if (signal.aborted) throw new Error('Request was aborted.');
    },
    done: async (): Promise<string> => {
      if (signal.aborted) throw new Error('Request was aborted.');
      return 'final';
    },
    name: 'runner',
  };
}

describe('createRunnerStop', () => {
  it('without a stop the runner is unchanged', async () => {
    const stop = createRunnerStop();
    const runner = stop.guard(runnerOf(stop.signal), ['done']);
    const steps: number[] = [];
    for await (const step of runner) steps.push(step as number);
    expect(steps).toEqual([1, 2]);
    await expect(runner.done()).resolves.toBe('final');
    expect(stop.signal.aborted).toBe(false);
  });

  it('after a stop the kept (first) error is thrown instead of the abort error', async () => {
    const stop = createRunnerStop();
    const runner = stop.guard(runnerOf(stop.signal), ['done']);
    const first = new Error('configuration');
    stop.stop(first);
    stop.stop(new Error('second'));
    expect(stop.signal.aborted).toBe(true);
    expect(stop.signal.reason).toBe(first);
    const steps: unknown[] = [];
    await expect(
      (async () => {
        for await (const step of runner) steps.push(step);
      })(),
    ).rejects.toBe(first);
    expect(steps).toEqual([1, 2]);
    await expect(runner.done()).rejects.toBe(first);
  });

  it("a runner's own error passes through when nothing stopped it", async () => {
    const stop = createRunnerStop();
    const own = new Error('overloaded');
    const runner = stop.guard(
      {
        async *[Symbol.asyncIterator]() {
          yield 1;
          throw own;
        },
        done: () => Promise.reject(own),
      },
      ['done'],
    );
    const steps = runner[Symbol.asyncIterator]();
    await expect(steps.next()).resolves.toEqual({ value: 1, done: false });
    await expect(steps.next()).rejects.toBe(own);
    await expect(runner.done()).rejects.toBe(own);
  });
});
