/**
 * Issue 16, finding 4: operators settle a record that is stuck (an attempt died mid-way and
 * somebody looked its effect up by hand): mark it completed with the outcome found, or release
 * it. Audited (one `settled` event naming who and why); a live attempt is never overruled.
 */
import { describe, expect, test, vi } from 'vitest';
import { InvalidInputError, OutcomeUnknownError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore } from '../store/memory-store.js';

const call = { toolName: 'charge', turnId: 'turn-1', args: { amount: 5 } };
const operator = { by: 'ops@example.com', reason: 'checked at the vendor: ch_9 exists' };

function stuck(leaseMs = 1) {
  let now = 1_000_000;
  const store = createMemoryStore({ now: () => now });
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({ store, onEvent: (e) => events.push(e) });
  const { key, fingerprint } = idempotency.keyOf(call);
  const dead = store.claim({
    key,
    fingerprint,
    token: 'dead-process',
    leaseMs,
    ttlMs: 60_000,
    meta: { toolName: 'charge', turnId: 'turn-1' },
  });
  return {
    store,
    events,
    idempotency,
    key,
    dead,
    pass: (ms: number) => {
      now += ms;
    },
  };
}

describe('idempotency.settle', () => {
  test('completed with the outcome found: replayed from then on, one settled event with the operator', async () => {
    const s = stuck();
    await s.dead;
    s.pass(10);
    const fn = vi.fn(async () => ({ id: 'ch_new' }));
    await expect(s.idempotency.run(call, fn)).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    const result = await s.idempotency.settle(s.key, { completed: { id: 'ch_9' } }, operator);
    expect(result).toMatchObject({
      key: s.key,
      action: 'completed',
      previous: { token: 'dead-process' },
    });
    expect(await s.idempotency.run(call, fn)).toMatchObject({
      replayed: true,
      value: { id: 'ch_9' },
    });
    expect(fn).not.toHaveBeenCalled();
    const settled = s.events.filter((e) => e.outcome === 'settled');
    expect(settled).toEqual([
      expect.objectContaining({
        key: s.key,
        toolName: 'charge',
        turnId: 'turn-1',
        operator: { ...operator, action: 'completed' },
      }),
    ]);
  });

  test('released: the call may run again', async () => {
    const s = stuck();
    await s.dead;
    s.pass(10);
    await s.idempotency.settle(
      s.key,
      { released: true },
      { by: 'ops', reason: 'vendor says no charge' },
    );
    const fn = vi.fn(async () => 'ran');
    expect(await s.idempotency.run(call, fn)).toMatchObject({ outcome: 'executed' });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('a live attempt is never overruled; finished and missing records are refused; nothing changes', async () => {
    const s = stuck(60_000);
    await s.dead;
    await expect(s.idempotency.settle(s.key, { released: true }, operator)).rejects.toSatisfy(
      (e) => InvalidInputError.isInstance(e) && /still held by a running attempt/.test(e.message),
    );
    expect((await s.store.get(s.key))?.token).toBe('dead-process');
    await expect(
      s.idempotency.settle('v1_nothing-here', { released: true }, operator),
    ).rejects.toThrow(/no live record/);
    const done = createIdempotency({ store: s.store });
    await done.run({ ...call, turnId: 'other' }, async () => 1);
    const finished = done.keyOf({ ...call, turnId: 'other' }).key;
    await expect(s.idempotency.settle(finished, { completed: 2 }, operator)).rejects.toThrow(
      /already completed/,
    );
  });

  test('bad input: typed errors naming the field; nothing stored', async () => {
    const s = stuck();
    await s.dead;
    s.pass(10);
    for (const [settlement, who, field] of [
      [{ completed: 1 }, { by: '', reason: 'x' }, 'by'],
      [{ completed: 1 }, { by: 'ops', reason: '' }, 'reason'],
      [{}, operator, 'settlement'],
      [{ completed: 10n }, operator, 'completed'],
    ] as const) {
      await expect(s.idempotency.settle(s.key, settlement as never, who)).rejects.toSatisfy(
        (e) => InvalidInputError.isInstance(e) && e.field === field,
      );
    }
    expect((await s.store.get(s.key))?.state).toBe('in_progress');
    expect(s.events.filter((e) => e.outcome === 'settled')).toEqual([]);
  });
});
