/**
 * Regressions found by an adversarial review of the new safety paths (http/, approvals, repeats,
 * lease), each fixed; the "before the fix" comments say what the code did.
 * Memory store only;
 * the HTTP handler is called as the fetch-style function it is (no socket needed).
 */
import { afterEach, describe, expect, test, vi } from 'vitest';
import { createDispatcher, type DispatchCall } from './adapter-kit/dispatch-calls.js';
import { createApprovals } from './approvals/approvals.js';
import {
  ApprovalConflictError,
  ApprovalPendingError,
  StoreUnavailableError,
} from './errors/index.js';
import { holdLease } from './executor/lease.js';
import { createIdempotency } from './executor.js';
import { idempotentHandler } from './http/handler.js';
import { sha256 } from './keys/canonicalize.js';
import { createMemoryStore, type MemoryStore } from './store/memory-store.js';
import type { IdempotencyStore } from './store/store.js';

const HOUR = 3_600_000;

/** A store passing every operation to `inner`, with some replaced. */
function over(inner: MemoryStore, replace: Partial<IdempotencyStore>): IdempotencyStore {
  return {
    specificationVersion: 'v1',
    name: 'probe',
    capabilities: inner.capabilities,
    claim: (input) => inner.claim(input),
    complete: (input) => inner.complete(input),
    release: (key, token) => inner.release(key, token),
    renew: (key, token, leaseMs) => inner.renew(key, token, leaseMs),
    takeover: (input) => inner.takeover(input),
    get: (key) => inner.get(key),
    waitForChange: (key, ms, signal) => inner.waitForChange(key, ms, signal),
    ...replace,
  };
}

const body = JSON.stringify({ amount: 5 });
const post = (key: string) =>
  new Request('http://127.0.0.1/payments', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body,
  });

describe('http: the handler policy is not pinned against the executor given', () => {
  test('a store outage is 503 (fail closed) even when the given executor defaults to fail-open', async () => {
    const down = over(createMemoryStore(), {
      claim: async () => {
        throw new StoreUnavailableError({ message: 'store down' });
      },
    });
    const idempotency = createIdempotency({ store: down, onStoreUnavailable: 'fail-open' });
    let effects = 0;
    const wrapped = idempotentHandler(
      async () => Response.json({ id: ++effects }, { status: 201 }),
      { idempotency, scope: 'shared' },
    );
    const first = await wrapped(post('k1'));
    const retry = await wrapped(post('k1'));
    // Before the fix: both run unguarded (effects 2) and the fresh run says Idempotent-Replayed: true.
    expect([first.status, retry.status, effects]).toEqual([503, 503, 0]);
  });

  /** A retry of k1 after a process claimed it, ran the effect and died: [status, effects]. */
  async function staleRetry(options: { onStale?: 'reexecute'; vendorDedupes?: boolean }) {
    const clock = { now: 1_000_000 };
    const store = createMemoryStore({ now: () => clock.now });
    const idempotency = createIdempotency({ store, lease: 1_000, ...options });
    let effects = 0;
    const wrapped = idempotentHandler(
      async () => Response.json({ id: ++effects }, { status: 201 }),
      { idempotency, scope: 'shared' },
    );
    const args = {
      idempotencyKey: 'k1',
      request: {
        method: 'POST',
        path: '/payments',
        query: '',
        contentType: 'application/json',
        body: sha256(body),
      },
    };
    const { key, fingerprint } = idempotency.keyOf(
      { toolName: 'http', args },
      { businessKey: (a: typeof args) => a.idempotencyKey },
    );
    await store.claim({ key, fingerprint, token: 'dead', leaseMs: 100, ttlMs: HOUR });
    effects++; // the dead process's effect
    clock.now += 10_000;
    const retry = await wrapped(post('k1'));
    return [retry.status, effects];
  }

  test('a stale request is outcome_unknown even when the executor defaults to onStale reexecute', async () => {
    expect(await staleRetry({})).toEqual([500, 1]); // control: the record above is k1's
    // vendorDedupes declared for the agent's vendor calls, not for this handler. Before the fix: [201, 2].
    expect(await staleRetry({ onStale: 'reexecute', vendorDedupes: true })).toEqual([500, 1]);
  });
});

describe('http: a returned response whose body fails', () => {
  test('the body stream erroring after the handler returned does not run the handler again', async () => {
    let effects = 0;
    const wrapped = idempotentHandler(
      async () => {
        effects++; // the payment is made
        let sent = 0;
        const stream = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent++ === 0) controller.enqueue(new TextEncoder().encode('{"id":'));
            else controller.error(new Error('upstream reset while streaming the body'));
          },
        });
        return new Response(stream, { status: 201 });
      },
      { store: createMemoryStore(), scope: 'shared' },
    );
    await wrapped(post('k1')).catch(() => undefined);
    await wrapped(post('k1')).catch(() => undefined);
    expect(effects).toBe(1); // before the fix: 2 (the claim was released as if nothing had happened)
  });

  test('large response headers: the first caller still gets its 201', async () => {
    const wrapped = idempotentHandler(
      async () =>
        new Response('{}', {
          status: 201,
          headers: { 'x-trace': 'a'.repeat(70_000) },
        }),
      { store: createMemoryStore(), scope: 'shared', maxResponseBytes: 1024 },
    );
    const first = await wrapped(post('k1'));
    // Before the fix: 500 outcome_not_stored (over the executor's maxResultBytes), and every retry too.
    expect([
      first.status,
      first.status === 201 || ((await first.json()) as { code: string }).code,
    ]).toEqual([201, true]);
  });
});

describe('approvals', () => {
  const policy = { businessKey: (a: { order: string; amount: number }) => a.order };
  const base = { toolName: 'refund', scope: 'acme' };

  test('an approval of args A never authorises args B under the same business key (after the request expired)', async () => {
    const clock = { now: 1_000_000 };
    const store = createMemoryStore({ now: () => clock.now });
    const approvals = createApprovals(createIdempotency({ store }));
    const a = { ...base, args: { order: '42', amount: 10 } };
    const b = { ...base, args: { order: '42', amount: 5_000 } };
    const { key } = await approvals.requestApproval(a, { policy });
    clock.now += HOUR;
    await approvals.approve(key, { by: 'alice' }); // alice approved 10 eur
    clock.now += 23 * HOUR + 60_000; // the request expired, the decision (1 h younger) has not
    const refunds: number[] = [];
    const refund = async (args: { amount: number }) => {
      refunds.push(args.amount);
      return 'ok';
    };
    const first = await approvals.run(b, refund, policy).catch((e: unknown) => e);
    expect(ApprovalPendingError.isInstance(first)).toBe(true); // B's new request: pending
    await approvals.run(b, refund, policy).catch(() => undefined);
    expect(refunds).toEqual([]); // before the fix: [5000], run on alice's approval of 10
  });

  test('an approve that failed mid-way (claim landed, complete lost) does not block a rejection', async () => {
    const clock = { now: 1_000_000 };
    const inner = createMemoryStore({ now: () => clock.now });
    let failCompletes = 0;
    const store = over(inner, {
      complete: async (input) => {
        if (failCompletes > 0) {
          failCompletes--;
          throw new StoreUnavailableError({ message: 'connection reset' });
        }
        return inner.complete(input);
      },
    });
    const approvals = createApprovals(createIdempotency({ store }));
    const { key } = await approvals.requestApproval({
      ...base,
      turnId: 't1',
      args: { order: '1' },
    });
    failCompletes = 3; // every resend of the decision's complete
    await expect(approvals.approve(key, { by: 'alice' })).rejects.toThrow(/connection reset/);
    expect((await approvals.getApproval(key))?.status).toBe('pending'); // nothing was decided
    clock.now += 60_000; // well past the decision cell's 10 s lease
    const rejected = await approvals.reject(key, { by: 'bob' }).catch((e: unknown) => e);
    // Before the fix: ApprovalConflictError "already approved by someone" for the whole ttl.
    expect(ApprovalConflictError.isInstance(rejected)).toBe(false);
    expect(rejected).toMatchObject({ status: 'rejected', by: 'bob' });
  });
});

describe('repeats', () => {
  test('a validate function (ajv) whose schema has its own "repeat" is refused when the dispatcher is made', () => {
    const validate = Object.assign(() => true, {
      schema: {
        type: 'object',
        properties: { to: { type: 'string' }, repeat: { type: 'integer' } },
      },
    });
    const make = () =>
      createDispatcher<DispatchCall>(
        { ring: { execute: () => 'ok', schema: validate } } as never,
        { store: createMemoryStore(), turnId: 't', policies: { ring: { repeatable: true } } },
        { caller: 'createToolDispatcher', howTo: 'turnId' },
      );
    // Before the fix: accepted; the tool's own `repeat` is taken out of every call as a deliberate repeat.
    expect(make).toThrow(/has its own "repeat"/);
  });
});

describe('lease', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  const fake = () =>
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'performance'] });

  test('a claim whose reply was slow is still renewed before the lease it secured runs out', async () => {
    fake();
    const inner = createMemoryStore();
    let renewals = 0;
    const store = over(inner, {
      claim: async (input) => {
        const answer = await inner.claim(input);
        await new Promise((resolve) => setTimeout(resolve, 600)); // a slow reply (0.6 lease)
        return answer;
      },
      renew: (key, token, leaseMs) => {
        renewals++;
        return inner.renew(key, token, leaseMs);
      },
    });
    const idempotency = createIdempotency({ store, lease: 1_000 });
    let owned: boolean[] = [];
    const running = idempotency.run(
      { toolName: 'charge', turnId: 't', args: {} },
      async (_args, ctx) => {
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        owned = [ctx.stillOwned(), !ctx.signal.aborted];
        return 'charged';
      },
    );
    await vi.advanceTimersByTimeAsync(3_000);
    await running.catch(() => undefined);
    // Before the fix: first renewal planned at reply + lease/3, after the holder's end (sent + 0.9 lease):
    // no renewal is ever sent, the lease is lost 300 ms into the tool.
    expect(renewals).toBeGreaterThan(0);
    expect(owned).toEqual([true, true]);
  });

  test('guard: renewals continue while the tool runs, and stop() leaves no timer', async () => {
    fake();
    const inner = createMemoryStore();
    let renewals = 0;
    const store = over(inner, {
      renew: (key, token, leaseMs) => {
        renewals++;
        return inner.renew(key, token, leaseMs);
      },
    });
    await inner.claim({ key: 'k', fingerprint: 'f', token: 't', leaseMs: 1_000, ttlMs: HOUR });
    const lease = holdLease(store, 'k', 't', 1_000, performance.now(), () => performance.now());
    const { signal } = lease;
    await vi.advanceTimersByTimeAsync(10_000); // ten leases
    expect(renewals).toBeGreaterThanOrEqual(25);
    expect([lease.stillOwned(), signal.aborted]).toEqual([true, false]);
    expect(vi.getTimerCount()).toBe(1);
    lease.stop();
    expect(vi.getTimerCount()).toBe(0);
    const before = renewals;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renewals).toBe(before);
  });

  test('guard: a lease lost to a takeover aborts a signal asked for only afterwards', async () => {
    fake();
    const inner = createMemoryStore();
    await inner.claim({ key: 'k', fingerprint: 'f', token: 't', leaseMs: 1_000, ttlMs: HOUR });
    const store = over(inner, { renew: async () => false }); // another attempt owns it now
    const lease = holdLease(store, 'k', 't', 1_000, performance.now(), () => performance.now());
    await vi.advanceTimersByTimeAsync(400); // the first renewal is answered false
    expect(lease.stillOwned()).toBe(false);
    expect(lease.signal.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
