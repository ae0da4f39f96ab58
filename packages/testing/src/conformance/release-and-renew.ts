import type { IdempotencyStore } from '@idempotent-tools/core';
import { FP_B } from './shared.js';
import type { ConformanceContext } from './types.js';

/** `release` deletes the record; `renew` extends the lease. */
export function defineReleaseAndRenewTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define, defineTimed } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, expectStoreTime, claimed } = ctx.fixture;

  describe('release and renew', () => {
    define('release deletes the record and the key can be claimed again', async ({ store }) => {
      const { k, owner } = await claimed(store);
      expect(await store.release(k, owner.token)).toBe(true);
      expect(await store.get(k)).toBeUndefined();
      expect(await store.release(k, owner.token)).toBe(false);

      // The record is gone: even another fingerprint acquires (no drift against a deleted record).
      const next = claimInput(k, { fingerprint: FP_B });
      const record = await acquire(store, next);
      expect(record.fingerprint).toBe(FP_B);
      expect(record.token).toBe(next.token);
    });

    defineTimed(
      'renew extends the lease: the record is not stale when the first lease would have run out',
      async ({ store, clock, t }) => {
        const lease = t.ms(100);
        const k = key();
        const owner = claimInput(k, { leaseMs: lease });
        const claimedAt = clock.now();
        const original = await acquire(store, owner);
        await clock.advance(t.ms(60));
        const before = clock.now();
        const renewedInTime = await store.renew(k, owner.token, lease);
        t.within(claimedAt, lease);
        expect(renewedInTime).toBe(true);
        const after = clock.now();
        const renewed = await mustGet(store, k);
        expect(renewed.leaseExpiresAt).toBeGreaterThan(original.leaseExpiresAt);
        expectStoreTime(renewed.leaseExpiresAt, before + lease, after + lease);
        expect({ ...renewed, leaseExpiresAt: 0, expiresAt: 0 }).toEqual({
          ...original,
          leaseExpiresAt: 0,
          expiresAt: 0,
        });
        expect(renewed.expiresAt).toBeGreaterThanOrEqual(renewed.leaseExpiresAt);

        await clock.advance(t.ms(60)); // past the first lease, inside the renewed one
        const inside = await store.claim(claimInput(k));
        t.within(before, lease);
        expectStatus(inside, 'in_progress');
        await clock.advance(t.ms(90)); // past the renewed lease
        expectStatus(await store.claim(claimInput(k)), 'stale');
      },
    );
  });
}
