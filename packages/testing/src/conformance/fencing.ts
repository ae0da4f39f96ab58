import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idempotent-tools/core';
import { LONG_LEASE, LONG_TTL } from './shared.js';
import type { ConformanceContext } from './types.js';

/** Only the owner's token completes, releases or renews; `complete` is accepted once. */
export function defineFencingTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete, completeInput } = ctx.fixture;
  const { claimed, finished, staleOwner, takenOver } = ctx.fixture;

  describe('fencing', () => {
    define(
      'complete, release and renew with a wrong token return false and change nothing',
      async ({ store }) => {
        const { k, owner } = await claimed(store);
        const other = claimInput(key('other'));
        await acquire(store, other);
        const before = await mustGet(store, k);

        // randomUUID() is lower case, so the upper-cased owner token differs only in case.
        for (const token of [randomUUID(), other.token, '', owner.token.toUpperCase()]) {
          expect(await store.complete(completeInput(k, token, 'completed', '"x"'))).toBe(false);
          expect(await store.release(k, token)).toBe(false);
          expect(await store.renew(k, token, LONG_LEASE * 2)).toBe(false);
        }
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    define(
      'after a takeover the old token can no longer complete, release or renew',
      async ({ store, clock }) => {
        const { k, owner, takeover } = await takenOver(store, clock);
        const before = await mustGet(store, k);

        expect(await store.complete(completeInput(k, owner.token, 'completed', '"late"'))).toBe(
          false,
        );
        expect(await store.release(k, owner.token)).toBe(false);
        expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(false);
        expect(await mustGet(store, k)).toEqual(before);

        await complete(store, k, takeover.token, 'completed', '"new owner"');
        expect((await mustGet(store, k)).outcome).toBe('"new owner"');
      },
    );

    define(
      'complete is accepted once: a second complete with another outcome or state returns false and keeps the first',
      async ({ store }) => {
        const { k, owner } = await claimed(store);
        await complete(store, k, owner.token, 'completed', '"first"');
        const before = await mustGet(store, k);
        for (const [state, outcome] of [
          ['completed', '"second"'],
          ['failed', '"second"'],
          ['failed', '"first"'],
          ['completed', '"first" '],
          ['completed', '"firs'],
          ['completed', ''],
        ] as const) {
          expect(
            await store.complete({ key: k, token: owner.token, state, outcome, ttlMs: LONG_TTL }),
          ).toBe(false);
        }
        const record = await mustGet(store, k);
        expect(record).toEqual(before);
        expect(record.state).toBe('completed');
        expect(record.outcome).toBe('"first"');
      },
    );

    define(
      'release and renew after complete return false and the record stays finished',
      async ({ store }) => {
        const base = key();
        for (const state of ['completed', 'failed'] as const) {
          const k = `${base}-${state}`;
          const { owner, record: before } = await finished(store, k, state);
          expect(await store.release(k, owner.token)).toBe(false);
          expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(false);
          expect(await mustGet(store, k)).toEqual(before);
          expectStatus(await store.claim(claimInput(k)), 'completed');
        }
      },
    );

    define(
      'the owner may complete after its lease ran out as long as nobody took over',
      async ({ store, clock }) => {
        const { k, owner } = await staleOwner(store, clock);
        expectStatus(await store.claim(claimInput(k)), 'stale');
        await complete(store, k, owner.token, 'completed', '"late but mine"');
        const result = expectStatus(await store.claim(claimInput(k)), 'completed');
        expect(result.record.outcome).toBe('"late but mine"');
      },
    );
  });
}
