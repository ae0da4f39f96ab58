import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idempotent-tools/core';
import { FP_A } from './shared.js';
import type { ConformanceContext } from './types.js';

/** A lease that ran out is `stale`; `takeover` moves ownership once, only from a stale lease. */
export function defineLeaseAndTakeoverTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define, defineTimed, ms, tolerance, LEASE, TTL, concurrency } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete, near } = ctx.fixture;
  const { expectStoreTime, count, claimed, staleOwner, takeoverInput } = ctx.fixture;

  describe('lease and takeover', () => {
    defineTimed(
      'a claim whose lease ran out reports stale with the old token',
      async ({ store, clock, t }) => {
        const k = key();
        const owner = claimInput(k, { leaseMs: t.ms(100) });
        const claimedAt = clock.now();
        await acquire(store, owner);
        await clock.advance(t.ms(40));
        const inside = await store.claim(claimInput(k));
        t.within(claimedAt, t.ms(100));
        expectStatus(inside, 'in_progress');

        await clock.advance(t.ms(110));
        const result = expectStatus(await store.claim(claimInput(k)), 'stale');
        expect(result.record.token).toBe(owner.token);
        expect(result.record.state).toBe('in_progress');
        // Reporting stale takes nothing over: a second claim still sees the old owner.
        const again = expectStatus(await store.claim(claimInput(k)), 'stale');
        expect(again.record.token).toBe(owner.token);
        expect((await mustGet(store, k)).token).toBe(owner.token);
      },
    );

    define(
      'takeover with the stale token moves ownership, with a fresh lease and the same createdAt',
      async ({ store, clock }) => {
        const { k, owner, record: original } = await staleOwner(store, clock);
        expectStatus(await store.claim(claimInput(k)), 'stale');

        const taking = takeoverInput(k, owner.token, { leaseMs: 30_000, ttlMs: 60_000 });
        const { token } = taking;
        const before = clock.now();
        expect(await store.takeover(taking)).toBe(true);
        const after = clock.now();

        const record = await mustGet(store, k);
        expect(record.token).toBe(token);
        expect(record.state).toBe('in_progress');
        expect(record.fingerprint).toBe(FP_A);
        expect(record.createdAt).toBe(original.createdAt);
        expect(record.leaseExpiresAt).toBeGreaterThanOrEqual(original.leaseExpiresAt + 30_000);
        expectStoreTime(record.leaseExpiresAt, before + 30_000, after + 30_000);
        expect(record.expiresAt).toBeGreaterThanOrEqual(record.leaseExpiresAt);
        near(record.expiresAt - record.leaseExpiresAt, 30_000, tolerance);

        const result = expectStatus(await store.claim(claimInput(k)), 'in_progress');
        expect(result.record.token).toBe(token);
        await complete(store, k, token);
        expectStatus(await store.claim(claimInput(k)), 'completed');
      },
    );

    define(
      'takeover with a wrong stale token returns false and changes nothing',
      async ({ store, clock }) => {
        const { k, owner } = await staleOwner(store, clock);
        const before = await mustGet(store, k);
        for (const staleToken of [randomUUID(), '', `${owner.token} `]) {
          const taking = takeoverInput(k, staleToken, { leaseMs: LEASE, ttlMs: TTL });
          expect(await store.takeover(taking)).toBe(false);
        }
        expect(await mustGet(store, k)).toEqual(before);
        expectStatus(await store.claim(claimInput(k)), 'stale');
      },
    );

    define(
      'takeover while the lease is live returns false and changes nothing',
      async ({ store }) => {
        const { k, owner } = await claimed(store);
        const before = await mustGet(store, k);
        expect(await store.takeover(takeoverInput(k, owner.token))).toBe(false);
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    define(
      'takeover of a completed or failed record returns false and changes nothing',
      async ({ store, clock }) => {
        const base = key();
        const owners = (['completed', 'failed'] as const).map((state) => ({
          state,
          input: claimInput(`${base}-${state}`, { leaseMs: LEASE }),
        }));
        for (const { state, input } of owners) {
          await acquire(store, input);
          await complete(store, input.key, input.token, state, `"${state}"`);
        }
        await clock.advance(ms(150));
        for (const { state, input } of owners) {
          const before = await mustGet(store, input.key);
          const taking = takeoverInput(input.key, input.token, { leaseMs: LEASE, ttlMs: TTL });
          expect(await store.takeover(taking)).toBe(false);
          const record = await mustGet(store, input.key);
          expect(record).toEqual(before);
          expect(record.state).toBe(state);
        }
      },
    );

    define('takeover of a missing key returns false and creates nothing', async ({ store }) => {
      const k = key();
      const taking = takeoverInput(k, randomUUID(), { leaseMs: LEASE, ttlMs: TTL });
      expect(await store.takeover(taking)).toBe(false);
      expect(await store.get(k)).toBeUndefined();
    });

    define(
      'concurrent takeovers of one stale record: exactly one wins',
      async ({ store, clock }) => {
        const { k, owner } = await staleOwner(store, clock);
        const tokens = Array.from({ length: Math.min(concurrency, 20) }, () => randomUUID());
        const results = await Promise.all(
          tokens.map((token) => store.takeover(takeoverInput(k, owner.token, { token }))),
        );
        expect(count(results, true)).toBe(1);
        const winner = tokens[results.indexOf(true)];
        expect((await mustGet(store, k)).token).toBe(winner);
      },
    );
  });
}
