import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idempotent-tools/core';
import { FP_A, LONG_LEASE, LONG_TTL } from './shared.js';
import type { ConformanceContext } from './types.js';

/** A lease that ran out is `stale`; `takeover` moves ownership once, only from a stale lease. */
export function defineLeaseAndTakeoverTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const {
    describe,
    expect,
    define,
    defineTimed,
    ms,
    tolerance,
    LEASE,
    TTL,
    concurrency,
    key,
    claimInput,
    expectStatus,
    acquire,
    mustGet,
    complete,
    near,
    expectStoreTime,
    count,
  } = ctx;

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
        const k = key();
        const owner = claimInput(k, { leaseMs: LEASE });
        const original = await acquire(store, owner);
        await clock.advance(ms(150));
        expectStatus(await store.claim(claimInput(k)), 'stale');

        const token = randomUUID();
        const before = clock.now();
        expect(
          await store.takeover({
            key: k,
            staleToken: owner.token,
            token,
            leaseMs: 30_000,
            ttlMs: 60_000,
          }),
        ).toBe(true);
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
        const k = key();
        const owner = claimInput(k, { leaseMs: LEASE });
        await acquire(store, owner);
        await clock.advance(ms(150));
        const before = await mustGet(store, k);
        for (const staleToken of [randomUUID(), '', `${owner.token} `]) {
          expect(
            await store.takeover({
              key: k,
              staleToken,
              token: randomUUID(),
              leaseMs: LEASE,
              ttlMs: TTL,
            }),
          ).toBe(false);
        }
        expect(await mustGet(store, k)).toEqual(before);
        expectStatus(await store.claim(claimInput(k)), 'stale');
      },
    );

    define(
      'takeover while the lease is live returns false and changes nothing',
      async ({ store }) => {
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
        const before = await mustGet(store, k);
        expect(
          await store.takeover({
            key: k,
            staleToken: owner.token,
            token: randomUUID(),
            leaseMs: LONG_LEASE,
            ttlMs: LONG_TTL,
          }),
        ).toBe(false);
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
          expect(
            await store.takeover({
              key: input.key,
              staleToken: input.token,
              token: randomUUID(),
              leaseMs: LEASE,
              ttlMs: TTL,
            }),
          ).toBe(false);
          const record = await mustGet(store, input.key);
          expect(record).toEqual(before);
          expect(record.state).toBe(state);
        }
      },
    );

    define('takeover of a missing key returns false and creates nothing', async ({ store }) => {
      const k = key();
      expect(
        await store.takeover({
          key: k,
          staleToken: randomUUID(),
          token: randomUUID(),
          leaseMs: LEASE,
          ttlMs: TTL,
        }),
      ).toBe(false);
      expect(await store.get(k)).toBeUndefined();
    });

    define(
      'concurrent takeovers of one stale record: exactly one wins',
      async ({ store, clock }) => {
        const k = key();
        const owner = claimInput(k, { leaseMs: LEASE });
        await acquire(store, owner);
        await clock.advance(ms(150));
        const tokens = Array.from({ length: Math.min(concurrency, 20) }, () => randomUUID());
        const results = await Promise.all(
          tokens.map((token) =>
            store.takeover({
              key: k,
              staleToken: owner.token,
              token,
              leaseMs: LONG_LEASE,
              ttlMs: LONG_TTL,
            }),
          ),
        );
        expect(count(results, true)).toBe(1);
        const winner = tokens[results.indexOf(true)];
        expect((await mustGet(store, k)).token).toBe(winner);
      },
    );
  });
}
