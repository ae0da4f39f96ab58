import { createIdempotency, createMemoryStore, InvalidInputError } from '@idempotent-tools/core';
import type { Context } from '@restatedev/restate-sdk';
import { expect, it } from 'vitest';
import { idempotentRun, runKey } from './index.js';

// Only what idempotentRun reads of a context before it calls ctx.run.
const ctx = { request: () => ({ id: 'inv_1abc' }) } as unknown as Context;
const idempotency = createIdempotency({ store: createMemoryStore() });

it('refuses a run without a name, before anything runs', () => {
  let ran = false;
  const run = () =>
    idempotentRun(ctx, idempotency, '', () => {
      ran = true;
    });
  expect(run).toThrow(InvalidInputError);
  expect(ran).toBe(false);
});

it('refuses a misspelt policy option when called', () => {
  expect(() =>
    idempotentRun(ctx, idempotency, 'charge', () => 1, {
      reconcil: async () => undefined,
    } as never),
  ).toThrow(InvalidInputError);
});

it('keys a run by the invocation id, the name and the occurrence', () => {
  const first = runKey(ctx, idempotency, 'charge');
  expect(runKey(ctx, idempotency, 'charge', { occurrence: 0 })).toBe(first);
  expect(runKey(ctx, idempotency, 'charge', { occurrence: 1 })).not.toBe(first);
  expect(runKey(ctx, idempotency, 'refund')).not.toBe(first);
  const other = { request: () => ({ id: 'inv_2def' }) } as unknown as Context;
  expect(runKey(other, idempotency, 'charge')).not.toBe(first);
});
