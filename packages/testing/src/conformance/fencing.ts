import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idempotent-tools/core';
import { LONG_LEASE, LONG_TTL } from './shared.js';
import type { ConformanceContext } from './types.js';

/** Only the owner's token completes, releases or renews; `complete` is accepted once. */
export function defineFencingTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const {
    describe,
    expect,
    define,
    ms,
    LEASE,
    key,
    claimInput,
    expectStatus,
    acquire,
    mustGet,
    complete,
  } = ctx;

  describe('fencing', () => {
    define(
      'complete, release and renew with a wrong token return false and change nothing',
      async ({ store }) => {
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
        const other = claimInput(key('other'));
        await acquire(store, other);
        const before = await mustGet(store, k);

        // randomUUID() is lower case, so the upper-cased owner token differs only in case.
        for (const token of [randomUUID(), other.token, '', owner.token.toUpperCase()]) {
          expect(
            await store.complete({
              key: k,
              token,
              state: 'completed',
              outcome: '"x"',
              ttlMs: LONG_TTL,
            }),
          ).toBe(false);
          expect(await store.release(k, token)).toBe(false);
          expect(await store.renew(k, token, LONG_LEASE * 2)).toBe(false);
        }
        expect(await mustGet(store, k)).toEqual(before);
      },
    );

    define(
      'after a takeover the old token can no longer complete, release or renew',
      async ({ store, clock }) => {
        const k = key();
        const owner = claimInput(k, { leaseMs: LEASE });
        await acquire(store, owner);
        await clock.advance(ms(150));
        const token = randomUUID();
        expect(
          await store.takeover({
            key: k,
            staleToken: owner.token,
            token,
            leaseMs: LONG_LEASE,
            ttlMs: LONG_TTL,
          }),
        ).toBe(true);
        const before = await mustGet(store, k);

        expect(
          await store.complete({
            key: k,
            token: owner.token,
            state: 'completed',
            outcome: '"late"',
            ttlMs: LONG_TTL,
          }),
        ).toBe(false);
        expect(await store.release(k, owner.token)).toBe(false);
        expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(false);
        expect(await mustGet(store, k)).toEqual(before);

        await complete(store, k, token, 'completed', '"new owner"');
        expect((await mustGet(store, k)).outcome).toBe('"new owner"');
      },
    );

    define(
      'complete is accepted once: a second complete with another outcome or state returns false and keeps the first',
      async ({ store }) => {
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
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
          const owner = claimInput(k);
          await acquire(store, owner);
          await complete(store, k, owner.token, state, `"${state}"`);
          const before = await mustGet(store, k);
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
        const k = key();
        const owner = claimInput(k, { leaseMs: LEASE });
        await acquire(store, owner);
        await clock.advance(ms(150));
        expectStatus(await store.claim(claimInput(k)), 'stale');
        await complete(store, k, owner.token, 'completed', '"late but mine"');
        const result = expectStatus(await store.claim(claimInput(k)), 'completed');
        expect(result.record.outcome).toBe('"late but mine"');
      },
    );
  });
}
