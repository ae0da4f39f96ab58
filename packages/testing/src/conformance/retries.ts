import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idempotent-tools/core';
import { AWKWARD_OUTCOMES, bigOutcome, FP_B, LONG_LEASE, LONG_TTL } from './shared.js';
import type { ConformanceContext } from './types.js';

/** Every operation may be sent again (its reply was lost) and means what it meant at first. */
export function defineRetryTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define, defineTimed, options } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete, completeInput } = ctx.fixture;
  const { claimed, finished, takeoverInput, takenOver, raceTakeovers } = ctx.fixture;

  describe('retries: every operation may be sent again (its reply was lost)', () => {
    define(
      'a claim sent again with its own token answers acquired, with the record as stored, and changes nothing',
      async ({ store }) => {
        const k = key();
        const meta = { toolName: 'charge', scope: 's', turnId: 't' };
        const owner = claimInput(k, { meta });
        const initial = await options.raw?.count(store);
        const first = await acquire(store, owner);
        const stored = await mustGet(store, k);
        for (let i = 0; i < 3; i++) {
          const again = expectStatus(await store.claim(owner), 'acquired');
          expect(again.token).toBe(owner.token);
          expect(again.record).toEqual(stored);
        }
        expect(first).toEqual(stored);
        expect(await mustGet(store, k)).toEqual(stored);
        const counted = await options.raw?.count(store);
        if (initial !== undefined && counted !== undefined) expect(counted).toBe(initial + 1);
        // Nobody else is let in: another attempt still sees the owner running.
        const other = expectStatus(await store.claim(claimInput(k)), 'in_progress');
        expect(other.record.token).toBe(owner.token);
        // The owner goes on as after its first claim.
        await complete(store, k, owner.token, 'completed', '"once"');
        const replay = expectStatus(await store.claim(owner), 'completed');
        expect(replay.record.outcome).toBe('"once"');
      },
    );

    define(
      'a claim sent again with its own token meets a finished record: completed; with another fingerprint: drift',
      async ({ store }) => {
        const base = key();
        for (const state of ['completed', 'failed'] as const) {
          const k = `${base}-${state}`;
          const { owner, record: before } = await finished(store, k, state);
          const result = expectStatus(await store.claim(owner), 'completed');
          expect(result.record).toEqual(before);
          expectStatus(await store.claim({ ...owner, fingerprint: FP_B }), 'drift');
          expect(await mustGet(store, k)).toEqual(before);
        }
        const k = `${base}-running`;
        const owner = claimInput(k);
        await acquire(store, owner);
        const before = await mustGet(store, k);
        const drift = expectStatus(await store.claim({ ...owner, fingerprint: FP_B }), 'drift');
        expect(drift.record).toEqual(before);
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    defineTimed(
      'a claim sent again with its own token after its lease ran out acquires with a renewed lease: the old lease can no longer be taken over',
      async ({ store, clock, t }) => {
        const lease = t.ms(100);
        const {
          k,
          owner,
          record: original,
        } = await claimed(store, { leaseMs: lease, ttlMs: LONG_TTL });
        await clock.advance(t.ms(150));
        expectStatus(await store.claim(claimInput(k)), 'stale');
        const reclaimedAt = clock.now();
        const again = expectStatus(await store.claim(owner), 'acquired');
        const taken = await store.takeover(takeoverInput(k, owner.token));
        const other = await store.claim(claimInput(k));
        t.within(reclaimedAt, lease);
        expect(again.token).toBe(owner.token);
        expect(again.record.token).toBe(owner.token);
        expect(again.record.state).toBe('in_progress');
        expect(again.record.createdAt).toBe(original.createdAt);
        expect(again.record.leaseExpiresAt).toBeGreaterThan(original.leaseExpiresAt);
        expect(again.record.expiresAt).toBeGreaterThanOrEqual(again.record.leaseExpiresAt);
        expect(await mustGet(store, k)).toEqual(again.record);
        expect(taken).toBe(false);
        expect(expectStatus(other, 'in_progress').record.token).toBe(owner.token);
      },
    );

    define(
      'concurrent own-token claim and takeover of a stale record: exactly one wins',
      async ({ store, clock }) => {
        const { owners, takers, races } = await raceTakeovers(store, clock, (input) =>
          store.claim({ ...input, leaseMs: LONG_LEASE }),
        );
        for (const [i, [claimed, taken]] of races.entries()) {
          expect(Number(claimed.status === 'acquired') + Number(taken)).toBe(1);
          const record = await mustGet(store, owners[i]!.key);
          expect(record.token).toBe(taken ? takers[i] : owners[i]!.token);
          // Lost to the takeover: the claim saw the new owner, or (its own record, a moment
          // before) a stale lease it could not renew; never acquired.
          if (taken) expect(['in_progress', 'stale']).toContain(claimed.status);
          expectStatus(await store.claim(claimInput(owners[i]!.key)), 'in_progress');
        }
      },
    );

    define(
      'complete sent again with the same token, state and outcome returns true and changes nothing',
      async ({ store }) => {
        const base = key();
        for (const [i, outcome] of ['"done"', AWKWARD_OUTCOMES[2]!, bigOutcome(), ''].entries()) {
          for (const state of ['completed', 'failed'] as const) {
            const k = `${base}-${state}-${i}`;
            const owner = claimInput(k);
            await acquire(store, owner);
            const input = completeInput(k, owner.token, state, outcome);
            expect(await store.complete(input)).toBe(true);
            const before = await mustGet(store, k);
            expect(await store.complete(input)).toBe(true);
            expect(await store.complete({ ...input, ttlMs: LONG_TTL * 2 })).toBe(true);
            expect(await mustGet(store, k)).toEqual(before);
            // Not by another token, not with another state or outcome.
            expect(await store.complete({ ...input, token: randomUUID() })).toBe(false);
            const other = state === 'completed' ? 'failed' : 'completed';
            expect(await store.complete({ ...input, state: other })).toBe(false);
            expect(await store.complete({ ...input, outcome: `${outcome}x` })).toBe(false);
            expect(await mustGet(store, k)).toEqual(before);
            const replay = expectStatus(await store.claim(claimInput(k)), 'completed');
            expect(replay.record.outcome).toBe(outcome);
          }
        }
      },
    );

    define(
      'complete sent again by the owner after another attempt took over and finished returns false',
      async ({ store, clock }) => {
        const { k, owner, takeover } = await takenOver(store, clock);
        await complete(store, k, takeover.token, 'completed', '"same"');
        const before = await mustGet(store, k);
        expect(await store.complete(completeInput(k, owner.token, 'completed', '"same"'))).toBe(
          false,
        );
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    define(
      'takeover sent again by the new owner returns true and changes nothing; by anyone else false',
      async ({ store, clock }) => {
        const { k, takeover: input } = await takenOver(store, clock);
        const before = await mustGet(store, k);
        expect(await store.takeover(input)).toBe(true);
        expect(await store.takeover({ ...input, leaseMs: LONG_LEASE * 2 })).toBe(true);
        expect(await mustGet(store, k)).toEqual(before);
        expect(await store.takeover({ ...input, token: randomUUID() })).toBe(false);
        expect(await mustGet(store, k)).toEqual(before);
        // Once the new owner finished, a late copy of its takeover changes nothing.
        await complete(store, k, input.token, 'completed', '"taken"');
        const finished = await mustGet(store, k);
        expect(await store.takeover(input)).toBe(false);
        expect(await mustGet(store, k)).toEqual(finished);
      },
    );

    define(
      'renew sent again by the owner returns true; release sent again returns false (it cannot be told from a release that lost)',
      async ({ store }) => {
        const { k, owner } = await claimed(store);
        expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(true);
        expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(true);
        expectStatus(await store.claim(claimInput(k)), 'in_progress');
        expect(await store.release(k, owner.token)).toBe(true);
        expect(await store.release(k, owner.token)).toBe(false);
        expect(await store.get(k)).toBeUndefined();
        // A claim sent again after the release is a new claim: it acquires a new record.
        const again = await acquire(store, owner);
        expect(again.token).toBe(owner.token);
      },
    );
  });
}
