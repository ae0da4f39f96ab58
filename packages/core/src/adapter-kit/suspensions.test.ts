import { describe, expect, test } from 'vitest';
import { NotAnOutcome } from '../executor/not-an-outcome.js';
import { runSuspendable } from './suspensions.js';

describe('runSuspendable: a call that suspended is no outcome', () => {
  test('the value of a call that did not suspend is returned; the context is kept', async () => {
    const context = { runId: 'r1', agent: { toolCallId: 'c1' } };
    const value = await runSuspendable(context, ['agent'], (c) => ({ seen: c }));
    expect(value).toEqual({ seen: context });
  });

  test.each([
    ['the context', (c: Record<string, { suspend: () => unknown }>) => c.suspend],
    ['a holder', (c: Record<string, { suspend: () => unknown }>) => c.agent?.suspend],
  ])(
    'a suspend through %s: NotAnOutcome with the value, the original suspend called',
    async (_, pick) => {
      const calls: unknown[] = [];
      const suspend = (...args: unknown[]) => calls.push(args);
      const context = { suspend, agent: { suspend } };
      const thrown = await runSuspendable(context, ['agent'], (c) => {
        (pick(c as never) as (...args: unknown[]) => unknown)('why');
        return 'waiting';
      }).catch((error: unknown) => error);
      expect(NotAnOutcome.isInstance(thrown)).toBe(true);
      expect((thrown as NotAnOutcome).value).toBe('waiting');
      expect(calls).toEqual([['why']]);
    },
  );

  test('no context at all: the tool still runs', async () => {
    expect(await runSuspendable(undefined, ['agent'], (c) => c)).toEqual({ agent: undefined });
  });
});
