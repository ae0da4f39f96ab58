import type { ClaimInput, IdempotencyRecord, IdempotencyStore } from '@idempotent-tools/core';
import { FP_B, LONG_LEASE } from './shared.js';
import type { ConformanceContext } from './types.js';

/**
 * Records expire after their TTL (counted from completion), to the millisecond; `purgeExpired`
 * removes them.
 */
export function defineTtlTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define, defineTimed, options, mode, ms, tolerance } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete, completeInput } = ctx.fixture;
  const { near, claimed, takeoverInput } = ctx.fixture;

  describe('ttl', () => {
    defineTimed('a completed record disappears after its ttl', async ({ store, clock, t }) => {
      const ttl = t.ms(300);
      const { k, owner } = await claimed(store, { leaseMs: t.ms(100) });
      const completedAt = clock.now();
      await complete(store, k, owner.token, 'completed', '"kept"', ttl);
      const kept = await store.get(k);
      // Read before the completion's ttl ran out (a loaded machine can sleep past it).
      t.within(completedAt, ttl);
      expect(kept).toBeDefined();
      if (kept === undefined) throw new Error(`expected a live record at ${k}`);
      const record = kept;
      near(record.expiresAt - (record.completedAt ?? Number.NaN), ttl, tolerance);

      await clock.advance(t.ms(150));
      const inside = await store.claim(claimInput(k));
      t.within(completedAt, ttl);
      expectStatus(inside, 'completed');
      await clock.advance(t.ms(200));
      expect(await store.get(k)).toBeUndefined();
      // Gone, not drifting: another fingerprint acquires.
      await acquire(store, claimInput(k, { fingerprint: FP_B }));
    });

    defineTimed('retention is counted from completion', async ({ store, clock, t }) => {
      const ttl = t.ms(150);
      const k = key();
      const owner = claimInput(k, { leaseMs: t.ms(60), ttlMs: ttl });
      const claimedAt = clock.now();
      await acquire(store, owner);
      await clock.advance(t.ms(100));
      const completedAt = clock.now();
      const stored = await store.complete(
        completeInput(k, owner.token, 'completed', '"done"', ttl),
      );
      t.within(claimedAt, ttl); // completed before the claim's ttl ran out
      expect(stored).toBe(true);
      await clock.advance(t.ms(100)); // past the claim's ttl, inside the completion's
      const inside = await store.claim(claimInput(k));
      t.within(completedAt, ttl);
      const result = expectStatus(inside, 'completed');
      expect(result.record.outcome).toBe('"done"');
      await clock.advance(t.ms(100)); // past the completion's ttl
      expect(await store.get(k)).toBeUndefined();
      await acquire(store, claimInput(k));
    });

    defineTimed(
      'an in_progress record outlives its lease (stale) until its ttl',
      async ({ store, clock, t }) => {
        const ttl = t.ms(200);
        const k = key();
        const owner = claimInput(k, { leaseMs: t.ms(60), ttlMs: ttl });
        const claimedAt = clock.now();
        await acquire(store, owner);
        await clock.advance(t.ms(100));
        const stale = await store.claim(claimInput(k));
        const record = await store.get(k);
        t.within(claimedAt, ttl);
        expectStatus(stale, 'stale');
        expect(record?.token).toBe(owner.token);
        await clock.advance(t.ms(150));
        expect(await store.get(k)).toBeUndefined();
        await acquire(store, claimInput(k));
      },
    );

    defineTimed('ttl has millisecond precision', async ({ store, clock, t }) => {
      const base = key();
      const long = claimInput(`${base}-long`, { leaseMs: t.ms(30), ttlMs: t.ms(250) });
      const short = claimInput(`${base}-short`, { leaseMs: t.ms(30), ttlMs: t.ms(250) });
      const longRunning = claimInput(`${base}-long-running`, {
        leaseMs: t.ms(20),
        ttlMs: t.ms(150),
      });
      const shortRunning = claimInput(`${base}-short-running`, {
        leaseMs: t.ms(20),
        ttlMs: t.ms(50),
      });
      const longRunningAt = clock.now();
      await acquire(store, longRunning);
      const claimedAt = clock.now();
      for (const input of [long, short, shortRunning]) await acquire(store, input);
      const shortDone = await store.complete(
        completeInput(short.key, short.token, 'completed', '"short"', t.ms(50)),
      );
      const longAt = clock.now();
      const longDone = await store.complete(
        completeInput(long.key, long.token, 'completed', '"long"', t.ms(150)),
      );
      // Completed before the claims' ttl ran out (a loaded machine can sleep past it).
      t.within(claimedAt, t.ms(250));
      expect(shortDone).toBe(true);
      expect(longDone).toBe(true);

      await clock.advance(t.ms(100));
      expect(await store.get(short.key)).toBeUndefined();
      expect(await store.get(shortRunning.key)).toBeUndefined();
      const longRecord = await store.get(long.key);
      const longRunningRecord = await store.get(longRunning.key);
      t.within(longRunningAt, t.ms(150));
      t.within(longAt, t.ms(150));
      expect(longRecord?.outcome).toBe('"long"');
      expect(longRunningRecord?.state).toBe('in_progress');

      await clock.advance(t.ms(100));
      expect(await store.get(long.key)).toBeUndefined();
      expect(await store.get(longRunning.key)).toBeUndefined();
    });

    define('expired records are invisible to every operation', async ({ store, clock }) => {
      const base = key();
      const ops = ['complete', 'release', 'renew', 'takeover', 'get', 'claim'] as const;
      const owners = new Map(
        ops.map((op) => [op, claimInput(`${base}-${op}`, { leaseMs: ms(60), ttlMs: ms(100) })]),
      );
      const created = new Map<string, IdempotencyRecord>();
      for (const [op, input] of owners) created.set(op, await acquire(store, input));
      await clock.advance(ms(150));

      // One key per operation, so each one meets an expired record nothing else touched.
      const owner = (op: (typeof ops)[number]): ClaimInput => owners.get(op)!;
      const { key: late, token } = owner('complete');
      expect(await store.complete(completeInput(late, token, 'completed', '"too late"'))).toBe(
        false,
      );
      expect(await store.release(owner('release').key, owner('release').token)).toBe(false);
      expect(await store.renew(owner('renew').key, owner('renew').token, LONG_LEASE)).toBe(false);
      const taking = takeoverInput(owner('takeover').key, owner('takeover').token);
      expect(await store.takeover(taking)).toBe(false);
      expect(await store.get(owner('get').key)).toBeUndefined();
      const fresh = await acquire(store, claimInput(owner('claim').key, { fingerprint: FP_B }));
      expect(fresh.createdAt).toBeGreaterThan(created.get('claim')!.createdAt);

      for (const op of ops) {
        if (op !== 'claim') expect(await store.get(owner(op).key)).toBeUndefined();
      }
    });

    /** Expiring records of earlier attempts of the clause below not purged yet, per store. */
    const purgeLeftovers = new WeakMap<S, number>();
    defineTimed(
      'purgeExpired (when present) removes expired records and returns how many',
      async ({ store, clock, t }) => {
        if (store.purgeExpired === undefined) return;
        const raw = options.raw;
        const rawCount = async (): Promise<number | undefined> =>
          raw === undefined ? undefined : raw.count(store);
        const base = key();
        const initial = await rawCount();

        const ttl = t.ms(60);
        const expiring = [
          claimInput(`${base}-running`, { leaseMs: t.ms(30), ttlMs: ttl }),
          claimInput(`${base}-stale`, { leaseMs: t.ms(30), ttlMs: ttl }),
          claimInput(`${base}-done`, { leaseMs: t.ms(30), ttlMs: ttl }),
        ];
        const live = claimInput(`${base}-live`);
        const startedAt = clock.now();
        for (const input of [...expiring, live]) await acquire(store, input);
        purgeLeftovers.set(store, (purgeLeftovers.get(store) ?? 0) + expiring.length);
        const done = expiring[2]!;
        const completed = await store.complete(
          completeInput(done.key, done.token, 'completed', '"done"', ttl),
        );
        // Its lease (30 ms x the attempt's factor) must still have been live when it completed:
        // on a loaded machine it may not be, and the attempt proves nothing.
        if (!completed) t.within(startedAt, t.ms(30));
        expect(completed).toBe(true);
        const populated = await rawCount();
        // Counted before any of them could expire (an engine may remove expired records itself).
        t.within(startedAt, ttl);
        if (initial !== undefined && populated !== undefined) {
          expect(populated).toBeGreaterThanOrEqual(initial + expiring.length + 1);
        }

        await clock.advance(t.ms(120));
        const before = await rawCount();
        const removed = await store.purgeExpired();
        const after = await rawCount();
        expect(removed).toBeGreaterThanOrEqual(0);
        // An earlier attempt that missed its window (same store) left records that expired
        // since: they are purged now too.
        expect(removed).toBeLessThanOrEqual(purgeLeftovers.get(store) ?? 0);
        purgeLeftovers.set(store, 0);
        if (before !== undefined && after !== undefined && populated !== undefined) {
          expect(after).toBeLessThanOrEqual(populated - expiring.length);
          // What purgeExpired removed is gone; an engine with its own expiry (Redis) may also
          // have removed some between the two counts, never fewer.
          expect(before - after).toBeGreaterThanOrEqual(removed);
          if (mode === 'virtual') expect(before - after).toBe(removed);
        }
        expect(await store.purgeExpired()).toBe(0);
        expect((await mustGet(store, live.key)).token).toBe(live.token);
        for (const input of expiring) expect(await store.get(input.key)).toBeUndefined();
      },
    );
  });
}
