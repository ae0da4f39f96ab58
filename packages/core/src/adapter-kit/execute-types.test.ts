import { describe, expectTypeOf, test } from 'vitest';
import type { ToolPolicy } from '../executor/types.js';
import type {
  ExecutePolicyOf,
  ExecuteToolOptions,
  ExecuteToolSetOptions,
} from './execute-types.js';

type Refund = { execute: (input: { cents: number }, options: unknown) => Promise<{ id: string }> };
type Stream = { execute: (input: { q: string }, options: unknown) => AsyncIterable<number> };

describe('ExecutePolicyOf: a policy typed by the tool execute (checked by typecheck)', () => {
  test('input and output of a promise, and of an async iterable (its last part)', () => {
    expectTypeOf<ExecutePolicyOf<Refund>>().toEqualTypeOf<
      ToolPolicy<{ cents: number }, { id: string }>
    >();
    expectTypeOf<ExecutePolicyOf<Stream>>().toEqualTypeOf<ToolPolicy<{ q: string }, number>>();
    expectTypeOf<ExecutePolicyOf<{ name: string }>>().toEqualTypeOf<ToolPolicy>();
  });

  test('the set and one-tool options type each tool policy', () => {
    type SetOptions = ExecuteToolSetOptions<unknown, { refund: Refund }>;
    const businessKey = (args: { cents: number }) => String(args.cents);
    expectTypeOf<{ policies: { refund: { businessKey: typeof businessKey } } }>().toMatchTypeOf<
      Pick<SetOptions, 'policies'>
    >();
    const wrong = (args: { amount: string }) => args.amount;
    expectTypeOf<{ policies: { refund: { businessKey: typeof wrong } } }>().not.toMatchTypeOf<
      Pick<SetOptions, 'policies'>
    >();
    expectTypeOf<{ policy: { businessKey: typeof businessKey } }>().toMatchTypeOf<
      Pick<ExecuteToolOptions<unknown, Refund>, 'policy'>
    >();
  });
});
