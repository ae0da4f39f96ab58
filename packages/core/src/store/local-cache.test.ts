/**
 * Issue 19: the local cache of finished records (`withLocalCache`). Every test counts the calls
 * that reach the store and runs on a virtual clock (no real time is waited for or measured).
 */
import { describe, expect, test, vi } from 'vitest';
import {
  DriftError,
  InProgressError,
  InvalidInputError,
  OutcomeUnknownError,
  ReplayedFailureError,
} from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { withLocalCache } from './local-cache.js';
import { createMemoryStore, type MemoryStore } from './memory-store.js';
import type { IdempotencyStore } from './store.js';

/** A store that counts the operations reaching it; `engine` can be swapped (data lost). */
function counted(engine: MemoryStore) {
  const calls: string[] = [];
  const box = { engine };
  const count =
    <A extends unknown[], R>(name: string, op: (store: MemoryStore, ...args: A) => R) =>
    (...args: A): R => {
      calls.push(name);
      return op(box.engine, ...args);
    };
  const store: IdempotencyStore = {
    specificationVersion: 'v1',
    name: 'counted-memory',
    capabilities: engine.capabilities,
    claim: count('claim', (s, input: Parameters<MemoryStore['claim']>[0]) => s.claim(input)),
    complete: count('complete', (s, input: Parameters<MemoryStore['complete']>[0]) =>
      s.complete(input),
    ),
    release: count('release', (s, key: string, token: string) => s.release(key, token)),
    renew: count('renew', (s, key: string, token: string, ms: number) => s.renew(key, token, ms)),
    takeover: count('takeover', (s, input: Parameters<MemoryStore['takeover']>[0]) =>
      s.takeover(input),
    ),
    get: count('get', (s, key: string) => s.get(key)),
    waitForChange: (key, ms, signal) => box.engine.waitForChange(key, ms, signal),
  };
  return { store, calls, box };
}

function setup(options: { maxEntries?: number; ttl?: number } = {}) {
  const clock = { now: 1_000_000 };
  const now = () => clock.now;
  const raw = counted(createMemoryStore({ now }));
  const store = withLocalCache(raw.store, { ...options, now });
  const idempotency = createIdempotency({ store });
  const fn = vi.fn(async (args: { amount: number; email?: string }) => ({
    chargeId: `ch_${args.amount}`,
  }));
  const call = (turnId: string, args: { amount: number; email?: string } = { amount: 5 }) => ({
    toolName: 'charge',
    turnId,
    args,
  });
  return {
    clock,
    now,
    raw,
    store,
    idempotency,
    fn,
    call,
    advance: (ms: number) => {
      clock.now += ms;
    },
    /** Store calls made by `op`. */
    callsOf: async (op: () => Promise<unknown>) => {
      const before = raw.calls.length;
      await op();
      return raw.calls.slice(before);
    },
  };
}

describe('withLocalCache: replays from memory', () => {
  test('a replay of a call this process completed makes no store call', async () => {
    const s = setup();
    const first = await s.idempotency.run(s.call('t1'), s.fn);
    expect(first).toMatchObject({ replayed: false, value: { chargeId: 'ch_5' } });
    expect(s.raw.calls).toEqual(['claim', 'complete']);
    let again: unknown;
    expect(
      await s.callsOf(async () => {
        again = await s.idempotency.run(s.call('t1'), s.fn);
      }),
    ).toEqual([]);
    expect(again).toEqual({ ...first, replayed: true, outcome: 'replayed' });
    expect(s.fn).toHaveBeenCalledTimes(1);
    expect(s.store.localCache.stats()).toMatchObject({ entries: 1, hits: 1, misses: 1 });
  });

  test('a record another process completed is cached from the first claim that replays it', async () => {
    const s = setup();
    // Another process: its own executor on the same engine, without the cache.
    const other = createIdempotency({ store: s.raw.box.engine });
    await other.run(s.call('t1'), s.fn);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual(['claim']);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual([]);
    expect(s.fn).toHaveBeenCalledTimes(1);
  });

  test('only the key seen: another turn, scope or args goes to the store', async () => {
    const s = setup();
    await s.idempotency.run(s.call('t1'), s.fn);
    const others = [
      s.call('t2'),
      { ...s.call('t1'), scope: 'tenant-b' },
      s.call('t1', { amount: 6 }),
      { ...s.call('t1'), toolName: 'refund' },
    ];
    for (const other of others) {
      expect(await s.callsOf(() => s.idempotency.run(other, s.fn))).toEqual(['claim', 'complete']);
    }
    expect(s.fn).toHaveBeenCalledTimes(5);
  });

  test('a stored terminal error is replayed from memory as ReplayedFailureError', async () => {
    const s = setup();
    const boom = vi.fn(async () => {
      throw Object.assign(new Error('card declined'), { code: 'declined' });
    });
    const policy = { isTerminalError: () => true };
    await expect(s.idempotency.run(s.call('t1'), boom, policy)).rejects.toThrow('card declined');
    for (let i = 0; i < 2; i++) {
      const calls = await s.callsOf(() =>
        expect(s.idempotency.run(s.call('t1'), boom, policy)).rejects.toSatisfy(
          ReplayedFailureError.isInstance,
        ),
      );
      expect(calls).toEqual([]); // its own terminal complete was cached
    }
    expect(boom).toHaveBeenCalledTimes(1);
  });
});

describe('withLocalCache: never answers for what it must not', () => {
  test('an in-progress record is not cached: a duplicate of a running call asks the store', async () => {
    const s = setup();
    let finish!: () => void;
    const slow = vi.fn(
      () => new Promise<{ ok: true }>((resolve) => (finish = () => resolve({ ok: true }))),
    );
    const running = s.idempotency.run(s.call('t1'), slow);
    await vi.waitFor(() => expect(slow).toHaveBeenCalled());
    for (let i = 0; i < 2; i++) {
      const calls = await s.callsOf(() =>
        expect(s.idempotency.run(s.call('t1'), slow, { onInProgress: 'reject' })).rejects.toSatisfy(
          InProgressError.isInstance,
        ),
      );
      expect(calls).toEqual(['claim']);
    }
    expect(s.store.localCache.stats().entries).toBe(0);
    finish();
    await running;
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), slow))).toEqual([]);
    expect(slow).toHaveBeenCalledTimes(1);
  });

  test('drift is detected from memory (the cached record keeps its fingerprint)', async () => {
    const s = setup();
    const byEmail = { businessKey: (args: { email?: string }) => args.email };
    await s.idempotency.run(s.call('t1', { amount: 5, email: 'a@example.com' }), s.fn, byEmail);
    const drifted = s.call('t1', { amount: 7, email: 'a@example.com' });
    expect(
      await s.callsOf(() =>
        expect(s.idempotency.run(drifted, s.fn, byEmail)).rejects.toSatisfy(DriftError.isInstance),
      ),
    ).toEqual([]);
    let replayed: unknown;
    expect(
      await s.callsOf(async () => {
        replayed = await s.idempotency.run(drifted, s.fn, { ...byEmail, onDrift: 'replay' });
      }),
    ).toEqual([]);
    expect(replayed).toMatchObject({ replayed: true, value: { chargeId: 'ch_5' } });
    expect(s.fn).toHaveBeenCalledTimes(1);
  });

  test('a record is never replayed past its own expiry (the cache ttl is longer)', async () => {
    const s = setup({ ttl: 60_000 });
    await s.idempotency.run(s.call('t1'), s.fn, { ttl: 500 });
    s.advance(499);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn, { ttl: 500 }))).toEqual([]);
    s.advance(1);
    const result = await s.idempotency.run(s.call('t1'), s.fn, { ttl: 500 });
    expect(result.replayed).toBe(false);
    expect(s.fn).toHaveBeenCalledTimes(2);
  });

  test('a complete sent again: the cached copy expires with the first send, not the retry', async () => {
    const s = setup({ ttl: 60_000 });
    // The first complete reaches the store, then its reply is lost after 300 ms.
    let lose = true;
    const complete = s.raw.store.complete;
    s.raw.store.complete = async (input) => {
      const done = await complete(input);
      if (!lose) return done;
      lose = false;
      s.advance(300);
      throw new Error('socket hang up');
    };
    const first = await s.idempotency.run(s.call('t1'), s.fn, { ttl: 1000 });
    expect(first.replayed).toBe(false);
    expect(s.raw.calls).toEqual(['claim', 'complete', 'complete']);
    s.advance(699); // 999 ms after the first complete: still live in the store
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn, { ttl: 1000 }))).toEqual([]);
    s.advance(1); // the store's record expired: a cache counting from the retry would replay it
    expect((await s.idempotency.run(s.call('t1'), s.fn, { ttl: 1000 })).replayed).toBe(false);
    expect(s.fn).toHaveBeenCalledTimes(2);
  });

  test('a record read from the store is cached only when it outlives the cache by the clock margin; else the store decides, on its clock', async () => {
    const s = setup({ ttl: 60_000 });
    // The engine's clock runs 5 s ahead of this process's (before the fix: a replay from memory
    // up to 5 s after the record expired in the store).
    s.raw.box.engine = createMemoryStore({ now: () => s.now() + 5_000 });
    const other = createIdempotency({ store: s.raw.box.engine });
    await other.run(s.call('t1'), s.fn, { ttl: 30_000 });
    s.advance(20_000);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual(['claim']);
    // Not cached (30 s of life < 60 s + the margin): the next replay asks the store again.
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual(['claim']);
    // 30 s after it was completed the record expires in the store; its expiresAt, read on this
    // clock, still says 5 s more.
    s.advance(10_001);
    expect((await s.idempotency.run(s.call('t1'), s.fn)).replayed).toBe(false);

    // A record that lives long (the default 24 h) is cached, for the cache ttl.
    await other.run(s.call('t2'), s.fn);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t2'), s.fn))).toEqual(['claim']);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t2'), s.fn))).toEqual([]);
  });
});

describe('withLocalCache: bounded', () => {
  test('by entries: the least recently used record is dropped', async () => {
    const s = setup({ maxEntries: 2 });
    for (const turn of ['a', 'b']) await s.idempotency.run(s.call(turn), s.fn);
    expect(await s.callsOf(() => s.idempotency.run(s.call('a'), s.fn))).toEqual([]); // a is recent
    await s.idempotency.run(s.call('c'), s.fn); // evicts b
    expect(s.store.localCache.stats()).toMatchObject({ entries: 2, evictions: 1 });
    expect(await s.callsOf(() => s.idempotency.run(s.call('a'), s.fn))).toEqual([]);
    expect(await s.callsOf(() => s.idempotency.run(s.call('c'), s.fn))).toEqual([]);
    expect(await s.callsOf(() => s.idempotency.run(s.call('b'), s.fn))).toEqual(['claim']);
    expect(s.fn).toHaveBeenCalledTimes(3);
  });

  test('by the cache ttl: a deletion outside this process is seen after at most ttl', async () => {
    const s = setup({ ttl: 1000 });
    await s.idempotency.run(s.call('t1'), s.fn);
    // The engine loses the record (an operator deleted it, a restart without persistence).
    s.raw.box.engine = createMemoryStore({ now: s.now });
    s.advance(999);
    expect((await s.idempotency.run(s.call('t1'), s.fn)).replayed).toBe(true);
    s.advance(1);
    const after = await s.callsOf(async () => {
      expect((await s.idempotency.run(s.call('t1'), s.fn)).replayed).toBe(false);
    });
    expect(after).toEqual(['claim', 'complete']);
  });

  test('a clock that went back ends the entries cached after it', async () => {
    const s = setup({ ttl: 1000 });
    await s.idempotency.run(s.call('t1'), s.fn);
    s.advance(-5_000);
    expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual(['claim']);
  });
});

describe('withLocalCache: writes through this wrapper drop the entry at once', () => {
  test('release, takeover and complete on a cached key drop it; localCache.delete too', async () => {
    const s = setup();
    await s.idempotency.run(s.call('t1'), s.fn);
    const { key } = s.idempotency.keyOf(s.call('t1'));
    const writes = [
      () => s.store.release(key, 'not-the-owner'),
      () => s.store.takeover({ key, staleToken: 'x', token: 'y', leaseMs: 10, ttlMs: 10 }),
      () => s.store.complete({ key, token: 'x', state: 'completed', outcome: '{}', ttlMs: 10 }),
      async () => s.store.localCache.delete(key),
    ];
    for (const write of writes) {
      expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual([]);
      expect(await write()).not.toBe(true); // refused: the record is finished
      expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual(['claim']);
    }
    expect(s.fn).toHaveBeenCalledTimes(1);
  });

  test('settle through this executor: completed is replayed as settled, released runs again', async () => {
    for (const settlement of [
      { completed: { chargeId: 'ch_found' } },
      { released: true },
    ] as const) {
      const s = setup();
      const { key, fingerprint } = s.idempotency.keyOf(s.call('t1'));
      await s.store.claim({ key, fingerprint, token: 'dead', leaseMs: 10, ttlMs: 60_000 });
      s.advance(20);
      await expect(s.idempotency.run(s.call('t1'), s.fn)).rejects.toSatisfy(
        OutcomeUnknownError.isInstance,
      );
      const operator = { by: 'ops@example.com', reason: 'looked it up at the vendor' };
      await s.idempotency.settle(key, settlement, operator);
      const after = await s.idempotency.run(s.call('t1'), s.fn);
      if ('completed' in settlement) {
        expect(after).toMatchObject({ replayed: true, value: { chargeId: 'ch_found' } });
        expect(s.fn).not.toHaveBeenCalled();
      } else {
        expect(after).toMatchObject({ replayed: false, value: { chargeId: 'ch_5' } });
      }
      expect(await s.callsOf(() => s.idempotency.run(s.call('t1'), s.fn))).toEqual([]);
    }
  });

  test('get answers a record read from the store from memory, as a copy', async () => {
    const s = setup();
    const other = createIdempotency({ store: s.raw.box.engine });
    await other.run(s.call('t1'), s.fn);
    const { key } = s.idempotency.keyOf(s.call('t1'));
    const read = await s.store.get(key);
    expect(read?.state).toBe('completed');
    let again: unknown;
    expect(
      await s.callsOf(async () => {
        again = await s.store.get(key);
      }),
    ).toEqual([]);
    expect(again).toEqual(read);
    (again as { state: string }).state = 'in_progress';
    expect((await s.store.get(key))?.state).toBe('completed');
  });
});

describe('withLocalCache: options', () => {
  test('keeps the name, capabilities and the optional operations the store has', () => {
    const inner = createMemoryStore();
    const store = withLocalCache(inner);
    expect(store.name).toBe('memory');
    expect(store.capabilities).toEqual(inner.capabilities);
    expect(typeof store.waitForChange).toBe('function');
    expect(typeof store.list).toBe('function');
    const { list: _list, stats: _stats, purgeExpired: _purge, ...bare } = inner;
    const plain = withLocalCache({
      ...bare,
      specificationVersion: 'v1',
      name: 'plain',
      capabilities: inner.capabilities,
      claim: (i) => inner.claim(i),
      complete: (i) => inner.complete(i),
      release: (k, t) => inner.release(k, t),
      renew: (k, t, l) => inner.renew(k, t, l),
      takeover: (i) => inner.takeover(i),
      get: (k) => inner.get(k),
    });
    expect(plain.waitForChange).toBeUndefined();
    expect(plain.list).toBeUndefined();
    expect(plain.purgeExpired).toBeUndefined();
  });

  test('bad options are refused when the store is wrapped, naming what to set', () => {
    const store = createMemoryStore();
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (error) {
        expect(InvalidInputError.isInstance(error)).toBe(true);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refused(() => withLocalCache(store, { maxEntrys: 10 } as never))).toMatch(
      /did you mean "maxEntries"/,
    );
    expect(refused(() => withLocalCache(store, { ttl: 0 }))).toMatch(/ttl must be a whole number/);
    expect(refused(() => withLocalCache(store, { maxEntries: 1.5 }))).toMatch(/maxEntries/);
    expect(refused(() => withLocalCache(undefined as never))).toMatch(/takes a store/);
    expect(
      refused(() =>
        withLocalCache({ ...store, claim: store.claim, specificationVersion: 'v0' } as never),
      ),
    ).toMatch(/needs 'v1'/);
  });
});
