import { describe, expect, test as realTest, vi } from 'vitest';
import {
  DriftError,
  IdempotencyError,
  InProgressError,
  InvalidInputError,
  OutcomeUnknownError,
  PersistFailedError,
  RecordIntegrityError,
  ReplayedFailureError,
  StoreUnavailableError,
} from '../errors/index.js';
import { createIdempotency, type IdempotencyOptions } from '../executor.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';
import { virtual } from '../test-utils/virtual-time.js';
import { NotAnOutcome } from './not-an-outcome.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function setup(
  options: Partial<IdempotencyOptions> = {},
  store: MemoryStore = createMemoryStore(),
) {
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({
    store,
    onEvent: (event) => events.push(event),
    ...options,
  });
  let runs = 0;
  const charge = async (args: { amount: number }) => {
    runs++;
    return { chargeId: `ch_${runs}`, amount: args.amount };
  };
  return { idempotency, store, events, charge, runs: () => runs };
}

// biome-ignore lint/suspicious/noExplicitAny: tests pass all kinds of args, bad ones included
const call = (args: any = { amount: 5 }, turnId = 'turn-1') => ({
  toolName: 'charge',
  turnId,
  args,
});

/** A store whose calls can be made to fail, to prove fail-closed and persist-failure paths. */
function faultyStore(
  inner: IdempotencyStore,
  faults: Partial<Record<keyof IdempotencyStore, 'throw' | 'false'>>,
): IdempotencyStore {
  const wrap =
    (name: keyof IdempotencyStore) =>
    async (...args: unknown[]) => {
      if (faults[name] === 'throw') throw new Error(`ECONNREFUSED (${String(name)})`);
      if (faults[name] === 'false') return false;
      return (inner[name] as (...a: unknown[]) => Promise<unknown>).apply(inner, args);
    };
  return {
    specificationVersion: 'v1',
    name: 'faulty',
    capabilities: inner.capabilities,
    claim: wrap('claim') as IdempotencyStore['claim'],
    complete: wrap('complete') as IdempotencyStore['complete'],
    release: wrap('release') as IdempotencyStore['release'],
    renew: wrap('renew') as IdempotencyStore['renew'],
    takeover: wrap('takeover') as IdempotencyStore['takeover'],
    get: wrap('get') as IdempotencyStore['get'],
  };
}

describe('fresh and replay', () => {
  test('the first call runs, a repeat replays the stored outcome without running', async () => {
    const { idempotency, charge, runs, events } = setup();
    const first = await idempotency.run(call(), charge);
    const second = await idempotency.run(call(), charge);
    expect(first).toMatchObject({ replayed: false, outcome: 'executed' });
    expect(second).toMatchObject({ replayed: true, outcome: 'replayed' });
    expect(second.value).toEqual(first.value);
    expect(second.key).toBe(first.key);
    expect(runs()).toBe(1);
    expect(events.map((e) => e.outcome)).toEqual(['executed', 'replayed']);
    expect(events[0]).toMatchObject({ toolName: 'charge', turnId: 'turn-1', store: 'memory' });
  });

  test('argument order does not matter; other args, turns and scopes are other calls', async () => {
    const { idempotency, runs } = setup();
    const fn = async () => runs();
    await idempotency.run(call({ a: 1, b: 2 }), fn);
    expect((await idempotency.run(call({ b: 2, a: 1 }), fn)).replayed).toBe(true);
    expect((await idempotency.run(call({ a: 1, b: 3 }), fn)).replayed).toBe(false);
    expect((await idempotency.run(call({ a: 1, b: 2 }, 'turn-2'), fn)).replayed).toBe(false);
    const scoped = await idempotency.run({ ...call({ a: 1, b: 2 }), scope: 'tenant-a' }, fn);
    expect(scoped.replayed).toBe(false);
    const otherScope = await idempotency.run({ ...call({ a: 1, b: 2 }), scope: 'tenant-b' }, fn);
    expect(otherScope.replayed).toBe(false);
    expect(new Set([scoped.key, otherScope.key]).size).toBe(2);
  });

  test('undefined, strings and nested values round trip through replay', async () => {
    const { idempotency } = setup();
    for (const [i, value] of [undefined, 'plain text', { n: [1, 'é', null] }, 0, false].entries()) {
      const fn = async () => value;
      await idempotency.run(call({ i }), fn);
      const again = await idempotency.run(call({ i }), fn);
      expect(again.replayed).toBe(true);
      expect(again.value).toEqual(value);
    }
  });

  test('wrap binds the tool name and policy once', async () => {
    const { idempotency, charge, runs } = setup();
    const chargeOnce = idempotency.wrap('charge', charge);
    const a = await chargeOnce({ amount: 9 }, { turnId: 't' });
    const b = await chargeOnce({ amount: 9 }, { turnId: 't' });
    expect([a.replayed, b.replayed, runs()]).toEqual([false, true, 1]);
    expect(a.key).toBe(
      idempotency.keyOf({ toolName: 'charge', turnId: 't', args: { amount: 9 } }).key,
    );
  });

  test('the tool sees its key, call and a live signal', async () => {
    const { idempotency } = setup();
    const seen = await idempotency.run({ ...call(), scope: 's' }, async (_args, ctx) => ({
      key: ctx.key,
      scope: ctx.scope,
      turnId: ctx.turnId,
      aborted: ctx.signal.aborted,
    }));
    expect(seen.value).toEqual({ key: seen.key, scope: 's', turnId: 'turn-1', aborted: false });
  });
});

describe('business keys and drift', () => {
  const createUser = async (args: { email: string; name: string }) => ({
    id: `u:${args.email}`,
    name: args.name,
  });
  const policy = { businessKey: (args: { email: string }) => args.email };

  test('same business key in another turn replays; other args are drift and nothing runs', async () => {
    const { idempotency, events } = setup();
    const fn = vi.fn(createUser);
    const args = { email: 'a@example.com', name: 'Ada' };
    await idempotency.run({ toolName: 'create_user', turnId: 't1', args }, fn, policy);
    const again = await idempotency.run(
      { toolName: 'create_user', turnId: 't2', args },
      fn,
      policy,
    );
    expect(again.replayed).toBe(true);
    const drift = idempotency.run(
      { toolName: 'create_user', turnId: 't3', args: { ...args, name: 'Bob' } },
      fn,
      policy,
    );
    await expect(drift).rejects.toSatisfy((e) => DriftError.isInstance(e) && e.code === 'drift');
    expect(fn).toHaveBeenCalledTimes(1);
    expect(events.at(-1)?.outcome).toBe('drift');
  });

  test("onDrift: 'replay' returns the stored outcome", async () => {
    const { idempotency } = setup();
    const fn = vi.fn(createUser);
    await idempotency.run({ toolName: 'u', args: { email: 'x', name: 'A' } }, fn, policy);
    const r = await idempotency.run({ toolName: 'u', args: { email: 'x', name: 'B' } }, fn, {
      ...policy,
      onDrift: 'replay',
    });
    expect(r).toMatchObject({ replayed: true, value: { name: 'A' } });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('a business key needs no turn id, and an undefined business key is a typed error', async () => {
    const { idempotency, store } = setup();
    const fn = vi.fn(createUser);
    const bad = idempotency.run(
      { toolName: 'u', args: { email: undefined as never, name: 'A' } },
      fn,
      policy,
    );
    await expect(bad).rejects.toSatisfy(
      (e) => InvalidInputError.isInstance(e) && e.field === 'businessKey',
    );
    expect(fn).not.toHaveBeenCalled();
    expect(store.size).toBe(0);
  });
});

describe('concurrent duplicates', () => {
  test('1,000 concurrent same-key calls run the tool once and all get the same outcome', async () => {
    const { idempotency, events } = setup();
    let runs = 0;
    const fn = async () => {
      runs++;
      await sleep(20);
      return { ticket: `T-${runs}` };
    };
    const results = await Promise.all(
      Array.from({ length: 1000 }, () => idempotency.run(call(), fn)),
    );
    expect(runs).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r.value)))).toEqual(
      new Set(['{"ticket":"T-1"}']),
    );
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'waited')).toHaveLength(999);
    expect(events).toHaveLength(1000);
  });

  test('waiters are woken by the holder, not by polling', async () => {
    const store = createMemoryStore();
    const claim = vi.spyOn(store, 'claim');
    const { idempotency } = setup({}, store);
    const fn = async () => {
      await sleep(300);
      return 1;
    };
    const [a, b] = await Promise.all([idempotency.run(call(), fn), idempotency.run(call(), fn)]);
    expect([a.outcome, b.outcome]).toEqual(['executed', 'waited']);
    // One claim for the holder; the waiter's first one, one after its capped first wait
    // (FIRST_WAIT_MS), and one after the holder's wake-up: no polling while the holder runs.
    expect(claim.mock.calls.length).toBeGreaterThanOrEqual(3);
    expect(claim.mock.calls.length).toBeLessThanOrEqual(4);
  });

  test("onInProgress: 'reject' fails at once with InProgressError", async () => {
    const { idempotency } = setup({ onInProgress: 'reject' });
    let release!: () => void;
    const holder = idempotency.run(
      call(),
      () => new Promise<number>((r) => (release = () => r(1))),
    );
    await sleep(5);
    const duplicate = idempotency.run(call(), async () => 2);
    await expect(duplicate).rejects.toSatisfy((e) => InProgressError.isInstance(e) && e.retryable);
    release();
    expect((await holder).value).toBe(1);
  });

  test('a wait longer than waitTimeout fails with InProgressError', async () => {
    const { idempotency, events } = setup({ waitTimeout: 50 });
    const holder = idempotency.run(call(), () => sleep(200).then(() => 1));
    await sleep(5);
    await expect(idempotency.run(call(), async () => 2)).rejects.toSatisfy(
      InProgressError.isInstance,
    );
    expect(events.at(-1)?.outcome).toBe('in-progress');
    await holder;
  });

  test('a waiter whose holder fails with a retryable error runs the call itself', async () => {
    const { idempotency } = setup();
    let attempt = 0;
    const fn = async () => {
      attempt++;
      await sleep(10);
      if (attempt === 1) throw new Error('vendor timeout');
      return attempt;
    };
    const [a, b] = await Promise.allSettled([
      idempotency.run(call(), fn),
      idempotency.run(call(), fn),
    ]);
    expect(a.status).toBe('rejected');
    expect(b).toMatchObject({ status: 'fulfilled', value: { value: 2, replayed: false } });
  });
});

describe('tool errors', () => {
  test('a retryable error releases the claim: the retry runs', async () => {
    const { idempotency, store, events } = setup();
    const fn = vi.fn().mockRejectedValueOnce(new Error('flaky')).mockResolvedValueOnce('ok');
    await expect(idempotency.run(call(), fn)).rejects.toThrow('flaky');
    const key = idempotency.keyOf(call()).key;
    expect(await store.get(key)).toBeUndefined();
    expect((await idempotency.run(call(), fn)).value).toBe('ok');
    expect(fn).toHaveBeenCalledTimes(2);
    expect(events.map((e) => [e.outcome, e.errorCode])).toEqual([
      ['failed', 'tool_error'],
      ['executed', undefined],
    ]);
  });

  test('a terminal error is stored and replayed, never re-run', async () => {
    const { idempotency } = setup({
      isTerminalError: (e) => (e as { code?: string }).code === 'card_declined',
    });
    const declined = Object.assign(new Error('Your card was declined'), { code: 'card_declined' });
    const fn = vi.fn().mockRejectedValue(declined);
    await expect(idempotency.run(call(), fn)).rejects.toBe(declined);
    const replay = idempotency.run(call(), fn);
    await expect(replay).rejects.toSatisfy(
      (e) =>
        ReplayedFailureError.isInstance(e) &&
        e.originalCode === 'card_declined' &&
        e.originalMessage === 'Your card was declined' &&
        e.replayed,
    );
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('a result that is not JSON fails the call and is kept as a failure, not re-run', async () => {
    const { idempotency, events } = setup();
    const fn = vi.fn(async () => ({ big: 10n }));
    await expect(idempotency.run(call(), fn)).rejects.toSatisfy(PersistFailedError.isInstance);
    await expect(idempotency.run(call(), fn)).rejects.toSatisfy(ReplayedFailureError.isInstance);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(events[0]?.outcome).toBe('persist-failed');
  });
});

describe('review fixes', () => {
  test('an isTerminalError that throws counts as "retryable": the claim is released, the retry runs', async () => {
    const { idempotency, store } = setup({
      isTerminalError: (e) => (e as { response: { status: number } }).response.status === 400,
    });
    const fn = vi.fn().mockRejectedValueOnce(new Error('network blip')).mockResolvedValueOnce('ok');
    await expect(idempotency.run(call(), fn)).rejects.toThrow('network blip');
    expect(await store.get(idempotency.keyOf(call()).key)).toBeUndefined();
    expect((await idempotency.run(call(), fn)).value).toBe('ok');
  });

  test('ttl <= lease: a holder that dies leaves a stale record, not one that expired with its lease', async () => {
    const inner = createMemoryStore();
    // The holder's renewals never reach the store (as if its process hung, then died).
    const holder = createIdempotency({
      store: faultyStore(inner, { renew: 'throw' }),
      lease: 5_000,
      ttl: 5_000,
    });
    let signal: AbortSignal | undefined;
    let finish!: () => void;
    const running = holder.run(call(), (_a, ctx) => {
      signal = ctx.signal;
      return new Promise<string>((resolve) => (finish = () => resolve('late')));
    });
    await sleep(7_500);
    // Its lease ran out (no renewal got through for a whole lease): the tool is told to stop.
    expect(signal?.aborted).toBe(true);
    const retry = createIdempotency({ store: inner, lease: 5_000, ttl: 5_000 });
    const fn = vi.fn(async () => 'again');
    await expect(retry.run(call(), fn)).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    expect(fn).not.toHaveBeenCalled();
    finish();
    await running.catch(() => undefined);
  });

  test('keyOf and wrap give typed errors for bad input', () => {
    const { idempotency } = setup();
    expect(() => idempotency.keyOf(call(), null as never)).toThrow(
      expect.objectContaining({ field: 'policy' }),
    );
    expect(() => idempotency.keyOf(call(), { businessKey: 'email' as never })).toThrow(
      expect.objectContaining({ field: 'businessKey' }),
    );
    expect(() => idempotency.wrap('t', async () => 1)({}, undefined as never)).toThrow(
      expect.objectContaining({ field: 'call' }),
    );
  });
});

describe('waiting behind a holder that dies', () => {
  test('a waiter re-claims when the holder lease runs out, not only after its own lease', async () => {
    const store = createMemoryStore();
    const claim = vi.spyOn(store, 'claim');
    const idempotency = createIdempotency({ store, lease: 30_000, waitTimeout: 30_000 });
    const { key, fingerprint } = idempotency.keyOf(call());
    // A holder (another process) claimed with a 50 ms lease and died: no change is ever pushed.
    await store.claim({ key, fingerprint, token: 'dead', leaseMs: 50, ttlMs: 60_000 });
    claim.mockClear();
    await expect(idempotency.run(call(), async () => 1)).rejects.toSatisfy(
      OutcomeUnknownError.isInstance,
    );
    // One claim saw it running, the next ones at the capped first wait and at its lease expiry:
    // a few claims, not a poll, long before our own 30 s lease could have run out.
    expect(claim.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(claim.mock.calls.length).toBeLessThanOrEqual(3);
    expect(performance.now()).toBeLessThan(30_000); // virtual time since the test began
  });
});

describe('stale records (a holder died mid-way)', () => {
  /** Leave an in_progress record whose lease has run out, as a crashed process would. */
  async function crashedAttempt(store: MemoryStore, key: string, fingerprint: string) {
    await store.claim({ key, fingerprint, token: 'dead-process', leaseMs: 1, ttlMs: 60_000 });
    await sleep(5);
  }

  test('default: OutcomeUnknownError, nothing runs, and the record stays for the next retry', async () => {
    const { idempotency, store, events } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    const fn = vi.fn(async () => 1);
    for (let i = 0; i < 2; i++) {
      await expect(idempotency.run(call(), fn)).rejects.toSatisfy(
        (e) =>
          OutcomeUnknownError.isInstance(e) &&
          !e.retryable &&
          /do not retry blindly/.test(e.message),
      );
    }
    expect(fn).not.toHaveBeenCalled();
    expect(events.map((e) => e.outcome)).toEqual(['outcome-unknown', 'outcome-unknown']);
  });

  test('reconcile finds the effect: it is adopted and replayed, the tool does not run', async () => {
    const { idempotency, store, events } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    const fn = vi.fn(async () => ({ chargeId: 'new' }));
    const reconcile = vi.fn(async (_ctx: unknown) => ({
      found: true as const,
      value: { chargeId: 'ch_found' },
    }));
    const r = await idempotency.run(call(), fn, { reconcile });
    expect(r).toMatchObject({
      replayed: true,
      outcome: 'reconciled',
      value: { chargeId: 'ch_found' },
    });
    expect(reconcile.mock.calls[0]?.[0]).toMatchObject({
      key,
      args: { amount: 5 },
      record: { token: 'dead-process' },
    });
    expect((await idempotency.run(call(), fn)).value).toEqual({ chargeId: 'ch_found' });
    expect(fn).not.toHaveBeenCalled();
    expect(events.map((e) => e.outcome)).toEqual(['reconciled', 'replayed']);
  });

  test('reconcile says it did not happen: the tool runs once', async () => {
    const { idempotency, store } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    const fn = vi.fn(async () => 'ran');
    const r = await idempotency.run(call(), fn, { reconcile: async () => ({ found: false }) });
    expect(r).toMatchObject({ replayed: false, value: 'ran' });
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('reconcile cannot tell (undefined or throws): OutcomeUnknownError', async () => {
    const { idempotency, store } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    const fn = vi.fn(async () => 'ran');
    await expect(
      idempotency.run(call(), fn, { reconcile: async () => undefined }),
    ).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    const boom = new Error('vendor down');
    await expect(
      idempotency.run(call(), fn, {
        reconcile: async () => {
          throw boom;
        },
      }),
    ).rejects.toSatisfy((e) => OutcomeUnknownError.isInstance(e) && e.cause === boom);
    expect(fn).not.toHaveBeenCalled();
  });

  test("onStale: 'reexecute' runs again, only when the tool declares vendorDedupes", async () => {
    const { idempotency, store } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    const keys: string[] = [];
    const fn = async (_a: unknown, ctx: { key: string }) => keys.push(ctx.key);
    // Without the declaration: a typed error that says why, and nothing runs or changes.
    await expect(idempotency.run(call(), fn, { onStale: 'reexecute' })).rejects.toSatisfy(
      (e) =>
        InvalidInputError.isInstance(e) && e.field === 'onStale' && /vendorDedupes/.test(e.message),
    );
    expect(() => createIdempotency({ store, onStale: 'reexecute' })).toThrow(/vendorDedupes: true/);
    await expect(
      idempotency.run(call(), fn, { onStale: 'reexecute', vendorDedupes: 'yes' as never }),
    ).rejects.toSatisfy((e) => InvalidInputError.isInstance(e) && e.field === 'vendorDedupes');
    expect(keys).toEqual([]);
    expect((await store.get(key))?.state).toBe('in_progress');
    const r = await idempotency.run(call(), fn, { onStale: 'reexecute', vendorDedupes: true });
    expect(r.replayed).toBe(false);
    expect(keys).toEqual([key]);
    // The declaration may also be an executor default.
    const declared = createIdempotency({ store, onStale: 'reexecute', vendorDedupes: true });
    const other = call({ amount: 2 });
    const k2 = declared.keyOf(other);
    await crashedAttempt(store, k2.key, k2.fingerprint);
    await declared.run(other, fn);
    expect(keys).toEqual([key, k2.key]);
  });

  test('the dead holder cannot overwrite the outcome of the attempt that took over', async () => {
    const { idempotency, store } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    await crashedAttempt(store, key, fingerprint);
    await idempotency.run(call(), async () => 'new', { onStale: 'reexecute', vendorDedupes: true });
    const late = await store.complete({
      key,
      token: 'dead-process',
      state: 'completed',
      outcome: '{"v":"old"}',
      ttlMs: 1000,
    });
    expect(late).toBe(false);
    expect((await idempotency.run(call(), async () => 'x')).value).toBe('new');
  });
});

describe('leases', () => {
  test('a long tool keeps its lease renewed: a duplicate waits instead of finding it stale', async () => {
    const { idempotency } = setup({ lease: 4_000, waitTimeout: 60_000 });
    const fn = vi.fn(async () => {
      await sleep(20_000);
      return 'done';
    });
    const holder = idempotency.run(call(), fn);
    await sleep(12_000); // three leases: only renewals keep it live
    const duplicate = idempotency.run(call(), fn);
    expect(await duplicate).toMatchObject({ replayed: true, outcome: 'waited', value: 'done' });
    expect((await holder).replayed).toBe(false);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('a holder that lost its lease gets PersistFailedError and its signal is aborted', async () => {
    const store = createMemoryStore();
    const { idempotency } = setup({ lease: 3_000 }, store);
    let signal: AbortSignal | undefined;
    const holder = idempotency.run(call(), async (_a, ctx) => {
      signal = ctx.signal;
      await sleep(15_000);
      return 'late';
    });
    await sleep(1_000);
    // Another attempt steals the record (as a takeover after a wrongly presumed crash would).
    const key = idempotency.keyOf(call()).key;
    const record = await store.get(key);
    expect(await store.release(key, record!.token)).toBe(true);
    await store.claim({
      key,
      fingerprint: record!.fingerprint,
      token: 'thief',
      leaseMs: 60_000,
      ttlMs: 60_000,
    });
    await expect(holder).rejects.toSatisfy(
      (e) => PersistFailedError.isInstance(e) && e.reason === 'lease_lost',
    );
    expect(signal?.aborted).toBe(true);
  });
});

describe('store failures', () => {
  test('a store that is down fails the call closed: the tool does not run', async () => {
    const store = faultyStore(createMemoryStore(), { claim: 'throw' });
    const events: IdempotencyEvent[] = [];
    const idempotency = createIdempotency({ store, onEvent: (e) => events.push(e) });
    const fn = vi.fn(async () => 1);
    await expect(idempotency.run(call(), fn)).rejects.toSatisfy(
      (e) => StoreUnavailableError.isInstance(e) && e.retryable && /did not run/.test(e.message),
    );
    expect(fn).not.toHaveBeenCalled();
    expect(events.map((e) => e.outcome)).toEqual(['store-unavailable']);
  });

  test('a failed persist fails the call, and the retry does not blindly re-run', async () => {
    const inner = createMemoryStore();
    const idempotency = createIdempotency({
      store: faultyStore(inner, { complete: 'throw' }),
      lease: 2_000,
    });
    const fn = vi.fn(async () => 'charged');
    await expect(idempotency.run(call(), fn)).rejects.toSatisfy(
      (e) => PersistFailedError.isInstance(e) && e.reason === 'store_error',
    );
    await sleep(3_000);
    const healthy = createIdempotency({ store: inner });
    await expect(healthy.run(call(), fn)).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('complete refused (lease lost) is PersistFailedError lease_lost', async () => {
    const idempotency = createIdempotency({
      store: faultyStore(createMemoryStore(), { complete: 'false' }),
    });
    await expect(idempotency.run(call(), async () => 1)).rejects.toSatisfy(
      (e) => PersistFailedError.isInstance(e) && e.reason === 'lease_lost',
    );
  });

  test('an observer that throws never breaks a call', async () => {
    const idempotency = createIdempotency({
      store: createMemoryStore(),
      onEvent: () => {
        throw new Error('observer bug');
      },
    });
    expect((await idempotency.run(call(), async () => 1)).value).toBe(1);
  });
});

describe('bad input: typed error, nothing runs, nothing is stored', () => {
  const cases: Array<[string, () => Promise<unknown>, string]> = [];
  const store = createMemoryStore();
  const idempotency = createIdempotency({ store });
  const fn = vi.fn(async () => 1);
  const add = (name: string, field: string, run: () => Promise<unknown>) =>
    cases.push([name, run, field]);
  add('empty tool name', 'toolName', () => idempotency.run({ ...call(), toolName: '' }, fn));
  add('oversized tool name', 'toolName', () =>
    idempotency.run({ ...call(), toolName: 'x'.repeat(129) }, fn),
  );
  add('tool name with a newline', 'toolName', () =>
    idempotency.run({ ...call(), toolName: 'a\nb' }, fn),
  );
  add('missing turn id', 'turnId', () => idempotency.run({ toolName: 't', args: {} }, fn));
  add('empty turn id', 'turnId', () => idempotency.run(call({}, ''), fn));
  add('oversized turn id', 'turnId', () => idempotency.run(call({}, 't'.repeat(513)), fn));
  add('empty scope', 'scope', () => idempotency.run({ ...call(), scope: '' }, fn));
  add('oversized scope', 'scope', () => idempotency.run({ ...call(), scope: 's'.repeat(257) }, fn));
  add('non-string turn id', 'turnId', () => idempotency.run(call({}, 42 as never), fn));
  add('BigInt args', 'args', () => idempotency.run(call({ n: 1n }), fn));
  add('NaN args', 'args', () => idempotency.run(call({ n: Number.NaN }), fn));
  add('undefined args', 'args', () => idempotency.run({ ...call(), args: undefined }, fn));
  add('args over the limit', 'args', () =>
    createIdempotency({ store, maxArgsBytes: 100 }).run(call({ s: 'x'.repeat(200) }), fn),
  );
  add('zero ttl', 'ttl', () => idempotency.run(call(), fn, { ttl: 0 }));
  add('negative lease', 'lease', () => idempotency.run(call(), fn, { lease: -5 }));
  add('fractional ttl', 'ttl', () => idempotency.run(call(), fn, { ttl: 1.5 }));
  add('unknown onStale', 'onStale', () =>
    idempotency.run(call(), fn, { onStale: 'retry' as never }),
  );
  add('non-function tool', 'fn', () => idempotency.run(call(), 'nope' as never));

  realTest.each(cases)('%s', async (_name, run, field) => {
    await expect(run()).rejects.toSatisfy(
      (e) =>
        InvalidInputError.isInstance(e) &&
        IdempotencyError.isInstance(e) &&
        e.field === field &&
        e.message.length > 20,
    );
    expect(fn).not.toHaveBeenCalled();
    expect(store.size).toBe(0);
  });

  test('bad options fail at creation', () => {
    expect(() => createIdempotency({ store, ttl: -1 })).toThrow(/ttl must be/);
    expect(() => createIdempotency({} as never)).toThrow(/needs \{ store \}/);
  });
});

describe('NotAnOutcome', () => {
  test('a value handed back without becoming the outcome: released whatever the policy says', async () => {
    const { idempotency, store, events } = setup();
    const policy = { isTerminalError: () => true, onToolError: 'keep' as const };
    let runs = 0;
    const fn = async () => {
      runs++;
      if (runs === 1) throw new NotAnOutcome({ needs: 'input' });
      return 'done';
    };
    const first = await idempotency.run(call(), fn, policy).catch((e: unknown) => e);
    expect(NotAnOutcome.isInstance(first)).toBe(true);
    expect((first as NotAnOutcome).value).toEqual({ needs: 'input' });
    expect(await store.get(idempotency.keyOf(call()).key)).toBeUndefined();
    expect(events.at(-1)).toMatchObject({ outcome: 'failed', errorCode: 'not_an_outcome' });
    expect((await idempotency.run(call(), fn, policy)).value).toBe('done');
    expect(runs).toBe(2);
  });
});

describe('the first caller gets exactly what a replay gets (issue 16, finding 10)', () => {
  test('Map, Set, NaN, Infinity, typed arrays, undefined, Date, class instances: round-tripped for the first caller too', async () => {
    const { idempotency } = setup();
    class Receipt {
      constructor(readonly id: string) {}
      get label() {
        return `receipt ${this.id}`;
      }
    }
    const produce = async () => ({
      map: new Map([['a', 1]]),
      set: new Set([1]),
      nan: Number.NaN,
      inf: Number.POSITIVE_INFINITY,
      bytes: new Uint8Array([1, 2]),
      gone: undefined,
      at: new Date(0),
      receipt: new Receipt('r1'),
      list: [undefined, 1],
    });
    const first = await idempotency.run(call(), produce);
    const replay = await idempotency.run(call(), produce);
    expect(replay.replayed).toBe(true);
    expect(first.value).toEqual(replay.value);
    expect(first.value).toStrictEqual({
      map: {},
      set: {},
      nan: null,
      inf: null,
      bytes: { 0: 1, 1: 2 },
      at: '1970-01-01T00:00:00.000Z',
      receipt: { id: 'r1' },
      list: [null, 1],
    });
    // Strings, numbers, booleans and null come back as they are.
    for (const [i, scalar] of ['text', 42, true, null].entries()) {
      expect((await idempotency.run(call({ i }), async () => scalar)).value).toBe(scalar);
    }
  });
});

describe('identities that identify nothing (issue 16, finding 11)', () => {
  test('a businessKey of null, {}, [] or "" is refused: nothing runs, nothing is stored', async () => {
    const { idempotency, store } = setup();
    const fn = vi.fn(async () => 1);
    for (const value of [null, {}, [], '']) {
      await expect(idempotency.run(call(), fn, { businessKey: () => value })).rejects.toSatisfy(
        (e) => InvalidInputError.isInstance(e) && e.field === 'businessKey',
      );
    }
    expect(fn).not.toHaveBeenCalled();
    expect(store.size).toBe(0);
  });

  test('a completed record with no outcome is refused as corrupt, never replayed as undefined', async () => {
    const { idempotency, store } = setup();
    const { key, fingerprint } = idempotency.keyOf(call());
    const claimed = await store.claim({
      key,
      fingerprint,
      token: 't',
      leaseMs: 60_000,
      ttlMs: 60_000,
    });
    expect(claimed.status).toBe('acquired');
    // A store that lost the outcome (or a hand-edited record): completed, nothing stored.
    const broken = {
      ...store,
      specificationVersion: 'v1' as const,
      name: 'broken',
      capabilities: store.capabilities,
      claim: async () => ({
        status: 'completed' as const,
        record: { ...(await store.get(key))!, state: 'completed' as const },
      }),
    } as unknown as IdempotencyStore;
    const fn = vi.fn(async () => 1);
    await expect(createIdempotency({ store: broken }).run(call(), fn)).rejects.toSatisfy(
      (e) => RecordIntegrityError.isInstance(e) && e.reason === 'corrupt',
    );
    expect(fn).not.toHaveBeenCalled();
  });
});

describe('waiting leaves nothing behind (issue 16, finding 8)', () => {
  test('500 waiters woken by the holder keep no timer of their waits', async () => {
    const { idempotency } = setup();
    const timers = () =>
      process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const before = timers();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const fn = async () => {
      await gate;
      return 'done';
    };
    const holder = idempotency.run(call(), fn);
    const waiters = Array.from({ length: 500 }, () => idempotency.run(call(), fn));
    await sleep(100); // every waiter is waiting (a lease-long wait after its capped first one)
    release();
    const results = await Promise.all([holder, ...waiters]);
    expect(results.filter((r) => r.outcome === 'waited')).toHaveLength(500);
    // Woken by this process: both the local wait's timer and the store's are gone.
    expect(timers() - before).toBeLessThan(20);
  });
});

describe('issue 27: a client passed as the store', () => {
  realTest(
    'a raw Redis, PostgreSQL or SQLite client gets the store that takes it, not "contract undefined"',
    () => {
      const redisLike = { evalsha: () => {}, hset: () => {}, on: () => {} };
      const pgLike = { query: () => {}, connect: () => {}, idleCount: 0 };
      const sqliteLike = { prepare: () => {}, exec: () => {} };
      for (const [client, hint] of [
        [redisLike, /a Redis client: wrap it, createRedisStore\(redis\)/],
        [pgLike, /a PostgreSQL client: wrap it, createPostgresStore\(pool\)/],
        [sqliteLike, /a SQLite database: use openSqliteStore\(path\)/],
        [{}, /pass createMemoryStore\(\), openSqliteStore\(path\)/],
      ] as const) {
        expect(() => createIdempotency({ store: client as never })).toThrow(hint);
      }
    },
  );
});
