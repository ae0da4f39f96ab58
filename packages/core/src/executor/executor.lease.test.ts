/**
 * Issue 16, findings 2 and 7: a holder that is alive but stalled must stop believing it owns the
 * call before the store can hand the call to anyone; replies to renewals that arrive after the
 * call finished change nothing. Leases are counted on a monotonic clock from when the claim or
 * renewal was sent, with a margin; a takeover that may run the tool again first sees the record
 * unchanged for the settle window (at least a lease) on its own clock.
 * Fake timers (the controllable clock): no verdict depends on how fast the machine is.
 */
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { PersistFailedError } from '../errors/index.js';
import { createIdempotency } from '../executor.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';
import { idempotencyHeaders, idempotentFetch } from '../vendor-calls/vendor.js';
import { holdLease, leaseMargin } from './lease.js';

const LEASE = 1_000;
const GRACE = leaseMargin(LEASE);
const call = { toolName: 'charge', turnId: 'turn-1', args: { amount: 5 } };

beforeEach(() => {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'],
  });
});
afterEach(() => {
  vi.useRealTimers();
});

/** The inner store, with renewals answered as `renew` says. */
function withRenew(
  inner: MemoryStore,
  renew: (key: string, token: string, leaseMs: number) => Promise<boolean>,
): IdempotencyStore {
  return {
    specificationVersion: 'v1',
    name: 'stalled',
    capabilities: inner.capabilities,
    claim: (input) => inner.claim(input),
    complete: (input) => inner.complete(input),
    release: (key, token) => inner.release(key, token),
    renew,
    takeover: (input) => inner.takeover(input),
    get: (key) => inner.get(key),
  };
}

const never = () => new Promise<boolean>(() => {});

/** A holder whose tool waits for `go`, then does its effect only if it still owns the call. */
function stalledHolder(store: IdempotencyStore, effects: string[]) {
  const idempotency = createIdempotency({ store, lease: LEASE });
  let go!: () => void;
  const gate = new Promise<void>((resolve) => (go = resolve));
  let ctx: { signal: AbortSignal; stillOwned(): boolean } | undefined;
  const running = idempotency.run(call, async (_args, context) => {
    ctx = context;
    await gate;
    if (context.stillOwned()) effects.push('holder');
    return 'holder';
  });
  running.catch(() => {});
  return { running, go, context: () => ctx };
}

describe('a stalled holder (renewals that hang) and its successor', () => {
  test('the holder stops believing it owns the call before the store can hand it over; only the successor acts', async () => {
    const inner = createMemoryStore();
    const effects: string[] = [];
    const holder = stalledHolder(withRenew(inner, never), effects);
    await vi.advanceTimersByTimeAsync(0);
    expect(holder.context()?.stillOwned()).toBe(true);

    await vi.advanceTimersByTimeAsync(LEASE - GRACE - 1);
    expect(holder.context()?.stillOwned()).toBe(true);
    await vi.advanceTimersByTimeAsync(1); // the margin before the store's lease ends
    expect(holder.context()?.stillOwned()).toBe(false);
    expect(holder.context()?.signal.aborted).toBe(true);

    // The store's lease runs out at LEASE; the successor's reconcile says it did not happen.
    await vi.advanceTimersByTimeAsync(GRACE);
    const successor = createIdempotency({ store: inner, lease: LEASE });
    let holderOwnedAtTakeover: boolean | undefined;
    const taking = successor.run(
      call,
      async () => {
        holderOwnedAtTakeover = holder.context()?.stillOwned();
        effects.push('successor');
        return 'successor';
      },
      { reconcile: async () => ({ found: false }) },
    );
    // The settle window: the record seen unchanged (no renewal) for a lease on its own clock.
    await vi.advanceTimersByTimeAsync(LEASE);
    expect(await taking).toMatchObject({ value: 'successor', outcome: 'executed' });
    expect(holderOwnedAtTakeover).toBe(false);

    holder.go(); // the holder wakes up and asks before its effect
    await expect(holder.running).rejects.toSatisfy(
      (e) => PersistFailedError.isInstance(e) && e.reason === 'lease_lost',
    );
    expect(effects).toEqual(['successor']);
  });

  test('a renewal counts from when it was sent, not when its late reply arrived', async () => {
    const inner = createMemoryStore();
    let renewals = 0;
    // The first renewal reaches the store at once (its lease runs to LEASE/3 + LEASE) but its
    // reply arrives 400 ms later (before the first lease's margin); every later renewal hangs.
    const store = withRenew(inner, async (key, token, leaseMs) => {
      if (++renewals > 1) return never();
      const owned = await inner.renew(key, token, leaseMs);
      await new Promise((resolve) => setTimeout(resolve, 400));
      return owned;
    });
    const effects: string[] = [];
    const holder = stalledHolder(store, effects);
    const sentAt = Math.floor(LEASE / 3);
    await vi.advanceTimersByTimeAsync(sentAt + 400); // the reply has arrived
    expect(holder.context()?.stillOwned()).toBe(true);
    // Counted from the send: owned until sentAt + LEASE - margin, before the store's lease ends
    // (counted from the reply it would last until sentAt + 400 + LEASE, past the store's).
    await vi.advanceTimersByTimeAsync(LEASE - GRACE - 400);
    expect(holder.context()?.stillOwned()).toBe(false);
    expect(holder.context()?.signal.aborted).toBe(true);
    expect((await inner.get(successorKey()))?.leaseExpiresAt).toBeGreaterThan(Date.now());
    holder.go();
    await holder.running.catch(() => {});
    expect(effects).toEqual([]);
  });

  test('a wall-clock step back does not keep a stalled holder believing it owns the call', async () => {
    const effects: string[] = [];
    const holder = stalledHolder(withRenew(createMemoryStore(), never), effects);
    await vi.advanceTimersByTimeAsync(LEASE / 2);
    vi.setSystemTime(Date.now() - 60 * 60 * 1000); // NTP steps the clock back an hour
    await vi.advanceTimersByTimeAsync(LEASE / 2 - GRACE);
    expect(holder.context()?.signal.aborted).toBe(true);
    expect(holder.context()?.stillOwned()).toBe(false);
    holder.go();
    await holder.running.catch(() => {});
    expect(effects).toEqual([]);
  });
});

function successorKey(): string {
  return createIdempotency({ store: createMemoryStore() }).keyOf(call).key;
}

describe('stillOwned is synchronous', () => {
  test('after a long synchronous step it says no, before any timer could fire', () => {
    const clock = { now: 0 };
    const store = createMemoryStore();
    const lease = holdLease(store, 'k', 't', LEASE, 0, () => clock.now);
    expect(lease.stillOwned()).toBe(true);
    clock.now = LEASE - GRACE; // the event loop was blocked: no timer ran
    expect(lease.stillOwned()).toBe(false);
    // A signal first asked for now is aborted already, though no timer has had its chance yet.
    expect(lease.signal.aborted).toBe(true);
    lease.stop();
  });

  test('idempotentFetch, idempotencyHeaders and vendorCall refuse to act for an attempt that lost its call', async () => {
    const sent: string[] = [];
    const fetch = idempotentFetch({
      fetch: async (input) => {
        sent.push(String(input));
        return new Response('{}');
      },
    });
    const idempotency = createIdempotency({
      store: withRenew(createMemoryStore(), never),
      lease: LEASE,
    });
    const outcome = idempotency.run(call, async (_args, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, LEASE)); // a stall past the margin
      const refusals: unknown[] = [];
      for (const act of [
        () => fetch('https://vendor.test/charges', { method: 'POST', body: '{}' }),
        async () => idempotencyHeaders(ctx),
        () => idempotency.vendorCall(ctx, 'bank.transfer', async () => 'sent'),
      ]) {
        refusals.push(
          await act().then(
            () => 'acted',
            (e: unknown) => e,
          ),
        );
      }
      return refusals.map((e) => PersistFailedError.isInstance(e) && e.reason === 'lease_lost');
    });
    await vi.advanceTimersByTimeAsync(LEASE);
    // Each refused with lease_lost; nobody took the call over, so its (effect-free) result is kept.
    expect((await outcome).value).toEqual([true, true, true]);
    expect(sent).toEqual([]);
  });
});

describe('replies after the call finished', () => {
  test('a renewal still in flight at completion, answered false afterwards, aborts nothing', async () => {
    const inner = createMemoryStore();
    const pending: Array<(owned: boolean) => void> = [];
    const store = withRenew(inner, () => new Promise<boolean>((resolve) => pending.push(resolve)));
    const idempotency = createIdempotency({ store, lease: LEASE });
    let signal: AbortSignal | undefined;
    const running = idempotency.run(call, async (_args, ctx) => {
      signal = ctx.signal;
      await new Promise((resolve) => setTimeout(resolve, LEASE / 2)); // one renewal is sent
      return 'done';
    });
    await vi.advanceTimersByTimeAsync(LEASE / 2);
    expect(await running).toMatchObject({ outcome: 'executed', value: 'done' });
    expect(pending.length).toBeGreaterThan(0);
    for (const resolve of pending) resolve(false); // "another attempt owns it": too late to matter
    await vi.advanceTimersByTimeAsync(LEASE * 2);
    expect(signal?.aborted).toBe(false);
  });
});

describe('the limit that remains: a process frozen in the middle of a vendor request', () => {
  /**
   * A vendor that charges on every request it receives; `dedupes`: it honours Idempotency-Key
   * like Stripe (the same key gets the first charge back). Requests are answered when `answer`
   * is called: the holder's request is in flight while the holder is frozen.
   */
  function vendor(dedupes: boolean) {
    const charges: string[] = [];
    const byKey = new Map<string, string>();
    const held: Array<() => void> = [];
    const fetch: typeof globalThis.fetch = async (_input, init) => {
      const key = new Headers(init?.headers).get('Idempotency-Key') ?? '';
      let id = dedupes ? byKey.get(key) : undefined;
      if (id === undefined) {
        id = `ch_${charges.length + 1}`;
        charges.push(id);
        byKey.set(key, id);
      }
      await new Promise<void>((resolve) => held.push(resolve));
      return new Response(JSON.stringify({ id }));
    };
    return {
      charges,
      fetch: idempotentFetch({ fetch }),
      answer: () => {
        for (const go of held.splice(0)) go();
      },
    };
  }

  async function frozenHolderThenSuccessor(dedupes: boolean) {
    const bank = vendor(dedupes);
    const inner = createMemoryStore();
    const charge = async () =>
      (
        await bank.fetch('https://vendor.test/charges', { method: 'POST', body: '{"amount":5}' })
      ).json();
    // The holder sends its request (the vendor receives it), then freezes: no renewal, no reply.
    const holder = createIdempotency({ store: withRenew(inner, never), lease: LEASE });
    const first = holder.run(call, charge);
    first.catch(() => {});
    await vi.advanceTimersByTimeAsync(LEASE + GRACE);
    // The successor may run again only because the vendor dedupes by the key it sends.
    const successor = createIdempotency({ store: inner, lease: LEASE });
    const second = successor.run(call, charge, { onStale: 'reexecute', vendorDedupes: true });
    await vi.advanceTimersByTimeAsync(LEASE); // the settle window
    bank.answer();
    await vi.advanceTimersByTimeAsync(0);
    bank.answer();
    return { charges: bank.charges, second: await second };
  }

  test('the vendor honours Idempotency-Key: the successor gets the first charge back, one effect', async () => {
    const { charges, second } = await frozenHolderThenSuccessor(true);
    expect(charges).toEqual(['ch_1']);
    expect(second.value).toEqual({ id: 'ch_1' });
  });

  test('negative control: a vendor without idempotency charges twice (why reexecute needs vendorDedupes)', async () => {
    const { charges } = await frozenHolderThenSuccessor(false);
    expect(charges).toEqual(['ch_1', 'ch_2']);
  });
});
