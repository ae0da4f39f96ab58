import { randomBytes } from 'node:crypto';
import { describe, expect, test, vi } from 'vitest';
import { DriftError, ReplayedFailureError } from '../errors/index.js';
import { createIdempotency, type IdempotencyOptions } from '../executor.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';

/** Same-key storms (issue #9): waiters woken together share one re-claim and one decode. */

const N = 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function setup(
  options: Partial<IdempotencyOptions> = {},
  store: MemoryStore = createMemoryStore(),
) {
  const events: IdempotencyEvent[] = [];
  const claim = vi.spyOn(store, 'claim');
  const idempotency = createIdempotency({
    store,
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { idempotency, store, claim, events };
}

/** A memory store whose change notifications the test releases (to change the record first). */
function gatedStore() {
  const inner = createMemoryStore();
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const store: IdempotencyStore = {
    specificationVersion: 'v1',
    name: 'gated',
    capabilities: inner.capabilities,
    claim: (input) => inner.claim(input),
    complete: (input) => inner.complete(input),
    release: (key, token) => inner.release(key, token),
    renew: (key, token, leaseMs) => inner.renew(key, token, leaseMs),
    takeover: (input) => inner.takeover(input),
    get: (key) => inner.get(key),
    waitForChange: () => gate,
  };
  return { inner, store, open };
}

const call = { toolName: 'quote', turnId: 't1', args: { sku: 'A-1' } };
const result = () => ({ price: 42, lines: [{ sku: 'A-1', qty: 2 }], note: 'ok' });

describe('same-key storm', () => {
  for (const encrypted of [false, true]) {
    test(`${N} concurrent callers: one execution, one re-claim, a copy each${encrypted ? ' (encrypted)' : ''}`, async () => {
      const { idempotency, claim, events } = setup(
        encrypted ? { encryption: { keys: { k1: randomBytes(32) }, current: 'k1' } } : {},
      );
      let runs = 0;
      let claimsBeforeWake = -1;
      const results = await Promise.all(
        Array.from({ length: N }, () =>
          idempotency.run(call, async () => {
            runs++;
            await sleep(30);
            claimsBeforeWake = claim.mock.calls.length;
            return result();
          }),
        ),
      );
      expect(runs).toBe(1);
      expect(claimsBeforeWake).toBe(N);
      // After the wake-up: one shared re-claim (not one per waiter).
      expect(claim.mock.calls.length - claimsBeforeWake).toBeLessThanOrEqual(5);
      const outcomes = results.map((r) => r.outcome).sort();
      expect(outcomes.filter((o) => o === 'executed')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'waited')).toHaveLength(N - 1);
      for (const r of results) {
        expect(r.value).toEqual(result());
        expect(r.replayed).toBe(r.outcome !== 'executed');
      }
      // Every caller gets its own value: changing one does not change another.
      expect(new Set(results.map((r) => r.value)).size).toBe(N);
      expect(new Set(results.map((r) => r.value.lines)).size).toBe(N);
      results[1]?.value.lines.push({ sku: 'B', qty: 1 });
      expect(results[2]?.value).toEqual(result());
      // One event per call, each waiter's with its own wait and the result size.
      expect(events).toHaveLength(N);
      const waited = events.filter((e) => e.outcome === 'waited');
      expect(waited).toHaveLength(N - 1);
      for (const e of waited) {
        expect(e.waitedMs).toBeGreaterThan(0);
        expect(e.resultBytes).toBe(Buffer.byteLength(JSON.stringify({ v: result() })));
      }
    });
  }

  test('the holder fails with a retryable error: waiters claim on their own, one runs', async () => {
    const { idempotency, events } = setup();
    let runs = 0;
    const settled = await Promise.allSettled(
      Array.from({ length: N }, () =>
        idempotency.run(call, async () => {
          runs++;
          await sleep(20);
          if (runs === 1) throw new Error('vendor timeout');
          return result();
        }),
      ),
    );
    expect(runs).toBe(2);
    const rejected = settled.filter((s) => s.status === 'rejected');
    expect(rejected).toHaveLength(1);
    expect((rejected[0] as PromiseRejectedResult).reason).toMatchObject({
      message: 'vendor timeout',
    });
    const values = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    expect(values).toHaveLength(N - 1);
    expect(values.filter((v) => v.outcome === 'executed')).toHaveLength(1);
    expect(values.filter((v) => v.outcome === 'waited')).toHaveLength(N - 2);
    for (const v of values) expect(v.value).toEqual(result());
    expect(events.filter((e) => e.outcome === 'failed')).toHaveLength(1);
    expect(events.filter((e) => e.outcome === 'executed')).toHaveLength(1);
    expect(events.filter((e) => e.outcome === 'waited')).toHaveLength(N - 2);
  });

  test('the holder fails with a terminal error: every waiter replays the failure', async () => {
    const { idempotency, claim } = setup();
    let runs = 0;
    let claimsBeforeWake = -1;
    const settled = await Promise.allSettled(
      Array.from({ length: N }, () =>
        idempotency.run(
          call,
          async () => {
            runs++;
            await sleep(20);
            claimsBeforeWake = claim.mock.calls.length;
            throw Object.assign(new Error('card declined'), { code: 'declined' });
          },
          { isTerminalError: () => true },
        ),
      ),
    );
    expect(runs).toBe(1);
    expect(claim.mock.calls.length - claimsBeforeWake).toBeLessThanOrEqual(5);
    const reasons = settled.map((s) => (s.status === 'rejected' ? s.reason : undefined));
    expect(reasons.filter((r) => ReplayedFailureError.isInstance(r))).toHaveLength(N - 1);
    for (const r of reasons)
      expect(r).toMatchObject({ message: expect.stringContaining('card declined') });
  });

  describe('a business key drifts while they wait', () => {
    const policy = { businessKey: (args: { email: string; plan: string }) => args.email };
    const mine = { toolName: 'signup', turnId: 't1', args: { email: 'a@x.io', plan: 'pro' } };
    const theirs = { ...mine, args: { email: 'a@x.io', plan: 'free' } };

    /**
     * `mine` is running elsewhere; N waiters of `mine` wait. It is then released and `theirs`
     * (same business key, other args) runs and completes before the waiters look again.
     */
    async function storm(onDrift: 'reject' | 'replay') {
      const { inner, store, open } = gatedStore();
      const claim = vi.spyOn(inner, 'claim');
      const idempotency = createIdempotency({ store });
      const held = idempotency.keyOf(mine, policy);
      const other = idempotency.keyOf(theirs, policy);
      expect(other.key).toBe(held.key);
      const ttlMs = 60_000;
      await inner.claim({
        key: held.key,
        fingerprint: held.fingerprint,
        token: 'h1',
        leaseMs: ttlMs,
        ttlMs,
      });
      let runs = 0;
      const calls = Array.from({ length: N }, () =>
        idempotency.run(
          mine,
          () => {
            runs++;
            return { plan: 'pro' };
          },
          { ...policy, onDrift },
        ),
      );
      while (claim.mock.calls.length < N + 1) await sleep(1);
      await sleep(5);
      await inner.release(held.key, 'h1');
      await inner.claim({
        key: other.key,
        fingerprint: other.fingerprint,
        token: 'h2',
        leaseMs: ttlMs,
        ttlMs,
      });
      await inner.complete({
        key: other.key,
        token: 'h2',
        state: 'completed',
        outcome: JSON.stringify({ v: { plan: 'free' } }),
        ttlMs,
      });
      const claimsBeforeWake = claim.mock.calls.length;
      open();
      const settled = await Promise.allSettled(calls);
      expect(runs).toBe(0);
      expect(claim.mock.calls.length - claimsBeforeWake).toBeLessThanOrEqual(5);
      return settled;
    }

    test("onDrift: 'reject': every waiter fails with DriftError", async () => {
      const settled = await storm('reject');
      for (const s of settled) {
        expect(s.status).toBe('rejected');
        expect(DriftError.isInstance((s as PromiseRejectedResult).reason)).toBe(true);
      }
    });

    test("onDrift: 'replay': every waiter replays the stored outcome, a copy each", async () => {
      const settled = await storm('replay');
      const values = settled.map((s) => {
        expect(s.status).toBe('fulfilled');
        return (s as PromiseFulfilledResult<{ value: { plan: string }; outcome: string }>).value;
      });
      for (const v of values) {
        expect(v.value).toEqual({ plan: 'free' });
        expect(v.outcome).toBe('waited');
      }
      expect(new Set(values.map((v) => v.value)).size).toBe(N);
    });
  });
});
