import { describe, expect, test } from 'vitest';
import { ConfigurationError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore } from '../store/memory-store.js';

describe('a tool made idempotent twice is refused, never left waiting for itself', () => {
  test('wrap of a wrapped function: a ConfigurationError at wrap time', () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const once = idempotency.wrap('charge', async (args: { amount: number }) => args.amount);
    let error: unknown;
    try {
      idempotency.wrap('charge', once as never);
    } catch (e) {
      error = e;
    }
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ option: 'wrap' });
  });

  test('a run of a key inside the run of the same key: refused at once, the tool never runs, the key is free again', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore(), waitTimeout: 30_000 });
    const call = { toolName: 'charge', turnId: 't', args: { amount: 5 } };
    let charges = 0;
    const inner = async () => {
      charges++;
      return 'ch_1';
    };
    const outer = () =>
      idempotency.run(call, () => idempotency.run(call, inner).then((r) => r.value));
    await expect(outer()).rejects.toMatchObject({ code: 'configuration', option: 'wrap' });
    expect(charges).toBe(0);
    // Released (nothing ran): the same call once wrapped runs.
    const fine = await idempotency.run(call, inner);
    expect(fine).toMatchObject({ replayed: false, value: 'ch_1' });
    expect(charges).toBe(1);
  });

  test('two executors on one store: the nested run of the same key is refused too', async () => {
    const store = createMemoryStore();
    const a = createIdempotency({ store });
    const b = createIdempotency({ store });
    const call = { toolName: 'charge', turnId: 't', args: {} };
    await expect(
      a.run(call, () => b.run(call, async () => 1).then((r) => r.value)),
    ).rejects.toMatchObject({ option: 'wrap' });
  });
});
