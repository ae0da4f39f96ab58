import type { IdempotencyStore } from '@idempotent-tools/core';
import { AWKWARD_OUTCOMES, FP_A, FP_B } from './shared.js';
import type { ConformanceContext } from './types.js';

/** The answers of `claim`: acquired, in_progress, completed (byte-exact, failed too), drift. */
export function defineClaimTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define, ms, tolerance, LEASE } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete, near } = ctx.fixture;
  const { expectStoreTime, claimed } = ctx.fixture;

  describe('claim', () => {
    define(
      'claim on an empty key acquires it and stores an in_progress record',
      async ({ store, clock }) => {
        const k = key();
        const meta = { toolName: 'create_ticket', scope: 'tenant-ü 1', turnId: 'turn:1' };
        const input = claimInput(k, { leaseMs: 30_000, ttlMs: 90_000, meta });
        const before = clock.now();
        const result = expectStatus(await store.claim(input), 'acquired');
        const after = clock.now();
        expect(result.token).toBe(input.token);

        const record = await mustGet(store, k);
        expect({ ...record, leaseExpiresAt: 0, expiresAt: 0, createdAt: 0 }).toEqual({
          key: k,
          state: 'in_progress',
          fingerprint: FP_A,
          token: input.token,
          leaseExpiresAt: 0,
          expiresAt: 0,
          createdAt: 0,
          meta,
        });
        expect(record.outcome).toBeUndefined();
        expect(record.completedAt).toBeUndefined();
        expectStoreTime(record.createdAt, before, after);
        near(record.leaseExpiresAt - record.createdAt, 30_000, tolerance);
        near(record.expiresAt - record.createdAt, 90_000, tolerance);
        expect(record.expiresAt).toBeGreaterThanOrEqual(record.leaseExpiresAt);
        expect(result.record).toEqual(record);
      },
    );

    define(
      'claim with the same fingerprint while the lease is live reports in_progress',
      async ({ store }) => {
        const k = key();
        const meta = { toolName: 'deploy' };
        const owner = claimInput(k, { meta });
        await acquire(store, owner);
        const before = await mustGet(store, k);

        const second = claimInput(k);
        const result = expectStatus(await store.claim(second), 'in_progress');
        expect(result.record.token).toBe(owner.token);
        expect(result.record.state).toBe('in_progress');
        expect(result.record.fingerprint).toBe(FP_A);
        expect(result.record.meta).toEqual(meta);
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    define(
      'claim after complete reports completed with the outcome byte-exact',
      async ({ store }) => {
        const base = key();
        for (const [i, outcome] of AWKWARD_OUTCOMES.entries()) {
          const k = `${base}-${i}`;
          const owner = claimInput(k);
          await acquire(store, owner);
          await complete(store, k, owner.token, 'completed', outcome);

          const result = expectStatus(await store.claim(claimInput(k)), 'completed');
          expect(result.record.state).toBe('completed');
          expect(result.record.outcome?.length).toBe(outcome.length);
          expect(result.record.outcome).toBe(outcome);
          expect(result.record.token).toBe(owner.token);
          expect(result.record.completedAt).toBeDefined();
          expect((await mustGet(store, k)).outcome).toBe(outcome);
        }
      },
    );

    define(
      'a failed outcome is replayed as status completed with state failed',
      async ({ store }) => {
        const { k, owner } = await claimed(store);
        const outcome = '{"error":{"name":"CardDeclined","message":"Karte abgelehnt – “nein”\\n"}}';
        await complete(store, k, owner.token, 'failed', outcome);

        const result = expectStatus(await store.claim(claimInput(k)), 'completed');
        expect(result.record.state).toBe('failed');
        expect(result.record.outcome).toBe(outcome);
        expect(result.record.completedAt).toBeDefined();
        expect((await mustGet(store, k)).state).toBe('failed');
      },
    );

    define(
      'claim with another fingerprint reports drift in every state',
      async ({ store, clock }) => {
        const base = key();
        const inProgress = claimInput(`${base}-in-progress`);
        const completed = claimInput(`${base}-completed`);
        const failed = claimInput(`${base}-failed`);
        const stale = claimInput(`${base}-stale`, { leaseMs: LEASE });
        for (const input of [inProgress, completed, failed, stale]) await acquire(store, input);
        await complete(store, completed.key, completed.token, 'completed', '"done"');
        await complete(store, failed.key, failed.token, 'failed', '"boom"');

        const drift = async (k: string, state: string, outcome?: string) => {
          const before = await mustGet(store, k);
          const result = expectStatus(
            await store.claim(claimInput(k, { fingerprint: FP_B })),
            'drift',
          );
          expect(result.record.fingerprint).toBe(FP_A);
          expect(result.record.state).toBe(state);
          expect(result.record.outcome).toBe(outcome);
          expect(await mustGet(store, k)).toEqual(before);
        };
        await drift(inProgress.key, 'in_progress');
        await drift(completed.key, 'completed', '"done"');
        await drift(failed.key, 'failed', '"boom"');

        await clock.advance(ms(150));
        expectStatus(await store.claim(claimInput(stale.key)), 'stale');
        await drift(stale.key, 'in_progress');
        await drift(completed.key, 'completed', '"done"');
      },
    );
  });
}
