/**
 * Issue 16: store faults around a call. Every store operation is safe to send again, and the
 * executor sends a failed claim again with the same token, so a lost reply never strands a key
 * or loses a result.
 */
import { describe, expect, test as realTest, vi } from 'vitest';
import { OutcomeUnknownError, PersistFailedError, StoreUnavailableError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { errorForModel } from '../model-output.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';
import { virtual } from '../test-utils/virtual-time.js';
import { idempotentFetch } from '../vendor-calls/vendor.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

const call = { toolName: 'charge', turnId: 'turn-1', args: { amount: 5 } };

/** The inner store, where `lose(op, n)` says whether the n-th reply of `op` is lost (applied, then thrown). */
function losingReplies(
  inner: MemoryStore,
  lose: (op: string, n: number) => boolean,
): IdempotencyStore & { sent: Record<string, number> } {
  const sent: Record<string, number> = {};
  const wrap =
    <A extends unknown[], R>(op: string, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      sent[op] = (sent[op] ?? 0) + 1;
      const result = await fn(...args);
      if (lose(op, sent[op])) throw new Error(`ECONNRESET (the reply of ${op} was lost)`);
      return result;
    };
  return {
    specificationVersion: 'v1',
    name: 'losing',
    capabilities: inner.capabilities,
    sent,
    claim: wrap('claim', (input) => inner.claim(input)),
    complete: wrap('complete', (input) => inner.complete(input)),
    release: wrap('release', (key: string, token: string) => inner.release(key, token)),
    renew: wrap('renew', (key: string, token: string, ms: number) => inner.renew(key, token, ms)),
    takeover: wrap('takeover', (input) => inner.takeover(input)),
    get: (key) => inner.get(key),
  };
}

/** The inner store with some operations replaced (private fields forbid Object.create). */
function withOverrides(inner: MemoryStore, overrides: Partial<IdempotencyStore>): IdempotencyStore {
  return {
    specificationVersion: 'v1',
    name: inner.name,
    capabilities: inner.capabilities,
    claim: (input) => inner.claim(input),
    complete: (input) => inner.complete(input),
    release: (key, token) => inner.release(key, token),
    renew: (key, token, ms) => inner.renew(key, token, ms),
    takeover: (input) => inner.takeover(input),
    get: (key) => inner.get(key),
    ...overrides,
  };
}

describe('a claim whose reply is lost (finding 3)', () => {
  test('it is sent again with the same token, answers acquired, and the tool runs once', async () => {
    const inner = createMemoryStore();
    const store = losingReplies(inner, (op, n) => op === 'claim' && n === 1);
    const idempotency = createIdempotency({ store });
    const fn = vi.fn(async () => 'charged');
    expect(await idempotency.run(call, fn)).toMatchObject({
      outcome: 'executed',
      value: 'charged',
    });
    expect(fn).toHaveBeenCalledTimes(1);
    expect(store.sent.claim).toBe(2);
    // No stuck record: the next call replays.
    expect(await idempotency.run(call, fn)).toMatchObject({ replayed: true, value: 'charged' });
  });

  test('every attempt lost: StoreUnavailableError, and the claim that landed is released (not stuck)', async () => {
    const inner = createMemoryStore();
    const store = losingReplies(inner, (op) => op === 'claim');
    const fn = vi.fn(async () => 'charged');
    await expect(createIdempotency({ store }).run(call, fn)).rejects.toSatisfy(
      StoreUnavailableError.isInstance,
    );
    expect(fn).not.toHaveBeenCalled();
    expect(store.sent.claim).toBe(4); // the first and three more with the same token
    const key = createIdempotency({ store: inner }).keyOf(call).key;
    expect(await inner.get(key)).toBeUndefined();
    // Once the store answers again the call runs normally: no outcome-unknown for a day.
    const healthy = createIdempotency({ store: inner });
    await expect(healthy.run(call, fn)).resolves.toMatchObject({ outcome: 'executed' });
    expect(fn).toHaveBeenCalledTimes(1);
  });
});

describe('complete fails once, or its reply is lost (findings 4 and 5)', () => {
  test('one transient error on complete: sent again while the lease is live, the result is kept', async () => {
    const inner = createMemoryStore();
    let completes = 0;
    const store: IdempotencyStore = withOverrides(inner, {
      complete: async (input: Parameters<MemoryStore['complete']>[0]) => {
        if (++completes === 1) throw new Error('SQLITE_BUSY: database is locked');
        return inner.complete(input);
      },
    });
    const idempotency = createIdempotency({ store });
    const fn = vi.fn(async () => 'charged');
    expect(await idempotency.run(call, fn)).toMatchObject({
      outcome: 'executed',
      value: 'charged',
    });
    expect(completes).toBe(2);
    expect(await idempotency.run(call, fn)).toMatchObject({ replayed: true, value: 'charged' });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('a complete whose reply was lost is sent again: the outcome is stored, the call succeeds', async () => {
    const inner = createMemoryStore();
    const store = losingReplies(inner, (op, n) => op === 'complete' && n === 1);
    const idempotency = createIdempotency({ store });
    const fn = vi.fn(async () => 'charged');
    expect(await idempotency.run(call, fn)).toMatchObject({
      outcome: 'executed',
      value: 'charged',
    });
    expect(store.sent.complete).toBe(2);
    expect(await idempotency.run(call, fn)).toMatchObject({ replayed: true });
  });

  test('a store that refuses the re-sent complete: the record says it is ours, so it is a success', async () => {
    const inner = createMemoryStore();
    let completes = 0;
    const store: IdempotencyStore = withOverrides(inner, {
      complete: async (input: Parameters<MemoryStore['complete']>[0]) => {
        const applied = await inner.complete(input);
        return ++completes === 1 ? false : applied; // as a store without idempotent complete
      },
    });
    const result = await createIdempotency({ store }).run(call, async () => 'charged');
    expect(result).toMatchObject({ outcome: 'executed', value: 'charged' });
  });

  test('the record is gone (a store restarted without persistence): said so, check first', async () => {
    const inner = createMemoryStore();
    const store: IdempotencyStore = withOverrides(inner, {
      complete: async (input: Parameters<MemoryStore['complete']>[0]) => {
        await inner.release(input.key, input.token); // the restart lost the record
        return false;
      },
    });
    const error = await createIdempotency({ store })
      .run(call, async () => 'charged')
      .catch((e: unknown) => e);
    expect(PersistFailedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/its record is gone from the store/);
    // The model's next step comes from the error's fields, never from its message text.
    expect((error as PersistFailedError).lost).toBe('record-gone');
    expect(errorForModel(error)?.next).toBe('check-first');
  });

  test('complete failing past the settle bound (twice the lease, at least 30 s): store_error that says the effect happened; the model checks first', async () => {
    const inner = createMemoryStore();
    let completes = 0;
    const store: IdempotencyStore = withOverrides(inner, {
      complete: async () => {
        completes++;
        throw new Error('connection terminated');
      },
    });
    const started = Date.now();
    const error = await createIdempotency({ store, lease: 3_000 })
      .run(call, async () => 'charged')
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'store_error' });
    expect(completes).toBeGreaterThan(20); // sent again past the lease, until the bound
    expect(Date.now() - started).toBeGreaterThanOrEqual(29_000);
    expect((error as Error).message).toMatch(/its effect happened/);
    expect(errorForModel(error)?.next).toBe('check-first');
  });
});

describe('a tool error after a request may have reached the vendor (finding 6)', () => {
  const vendorFetch = () => {
    const received: string[] = [];
    const fetch = idempotentFetch({
      fetch: async (_input, init) => {
        received.push(new Headers(init?.headers).get('Idempotency-Key') ?? '');
        throw new TypeError('fetch failed: request timed out'); // sent; the reply never came
      },
    });
    return { received, fetch };
  };
  const charge = (fetch: typeof globalThis.fetch) => async () =>
    (await fetch('https://vendor.test/charges', { method: 'POST', body: '{"amount":5}' })).json();

  test('default: a timeout after a keyed request to a vendor not declared to dedupe keeps the attempt (no blind re-send)', async () => {
    const { received, fetch } = vendorFetch();
    const idempotency = createIdempotency({ store: createMemoryStore() });
    await expect(idempotency.run(call, charge(fetch))).rejects.toThrow('timed out');
    await expect(idempotency.run(call, charge(fetch))).rejects.toSatisfy(
      OutcomeUnknownError.isInstance,
    );
    expect(received).toHaveLength(1); // the request was not sent a second time
  });

  test('the same with reconcile: the retry looks the effect up instead', async () => {
    const { received, fetch } = vendorFetch();
    const idempotency = createIdempotency({ store: createMemoryStore() });
    await expect(idempotency.run(call, charge(fetch))).rejects.toThrow('timed out');
    const found = await idempotency.run(call, charge(fetch), {
      reconcile: async () => ({ found: true, value: { id: 'ch_1' } }),
    });
    expect(found).toMatchObject({ outcome: 'reconciled', value: { id: 'ch_1' } });
    expect(received).toHaveLength(1);
  });

  test('the vendor dedupes by the key (vendorDedupes): released, the retry sends the same key again', async () => {
    const { received, fetch } = vendorFetch();
    const idempotency = createIdempotency({ store: createMemoryStore(), vendorDedupes: true });
    await expect(idempotency.run(call, charge(fetch))).rejects.toThrow('timed out');
    await expect(idempotency.run(call, charge(fetch))).rejects.toThrow('timed out');
    expect(received).toHaveLength(2);
    expect(received[0]).toBe(received[1]);
  });

  test('nothing was sent (the tool failed before any request): released, a retry runs', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let runs = 0;
    const fn = async () => {
      if (++runs === 1) throw new Error('validation failed before the request');
      return 'ok';
    };
    await expect(idempotency.run(call, fn)).rejects.toThrow('validation failed');
    expect((await idempotency.run(call, fn)).value).toBe('ok');
  });

  test("onToolError: 'release' and 'keep' still decide as they say", async () => {
    for (const [onToolError, retried] of [
      ['release', 2],
      ['keep', 1],
    ] as const) {
      const { received, fetch } = vendorFetch();
      const idempotency = createIdempotency({ store: createMemoryStore(), onToolError });
      await expect(idempotency.run(call, charge(fetch))).rejects.toThrow();
      await expect(idempotency.run(call, charge(fetch))).rejects.toThrow();
      expect(received).toHaveLength(retried);
    }
  });
});
