import type { IdempotencyStore } from '@idempotent-tools/core';
import { sleep } from '../clock.js';
import { SETTLED, watch } from './shared.js';
import type { ConformanceContext } from './types.js';

/** `waitForChange` (optional) wakes on complete and release, times out, aborts, survives close. */
export function defineWaitForChangeTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define, defineTimed, ms } = ctx;
  const { key, claimInput, acquire, complete, claimed } = ctx.fixture;

  describe('waitForChange', () => {
    /** How the owner of `k` changes it: the two changes a waiter is woken by. */
    const changes: Record<string, (store: S, k: string, token: string) => Promise<void>> = {
      complete: (store, k, token) => complete(store, k, token),
      release: async (store, k, token) => expect(await store.release(k, token)).toBe(true),
    };
    for (const [change, run] of Object.entries(changes)) {
      defineTimed(
        `waitForChange (when present) resolves promptly after ${change}`,
        async ({ store, clock, t }) => {
          if (store.waitForChange === undefined) return;
          // A long wait: resolving before its timeout proves a push woke the waiter.
          const wait = t.ms(20_000);
          const { k, owner } = await claimed(store);
          const startedAt = clock.now();
          const waiting = watch(store.waitForChange(k, wait));
          await sleep(t.ms(50));
          const early = waiting.state();
          const changedAt = performance.now();
          await run(store, k, owner.token);
          const settled = await waiting.settle(wait / 2);
          const elapsed = performance.now() - changedAt;
          // Within half the wait's own timeout (a loaded machine can sleep past it, then the
          // attempt is run again with longer durations): only a push can have resolved it, and
          // a settle that gave up at wait / 2 proves nothing.
          t.within(startedAt, wait / 2);
          expect(early).toBe('pending');
          expect(settled).toBe('resolved');
          expect(elapsed).toBeLessThan(wait / 2);
        },
      );
    }

    define(
      'waitForChange (when present) resolves after its timeout when nothing happens',
      async ({ store }) => {
        if (store.waitForChange === undefined) return;
        const k = key();
        await acquire(store, claimInput(k));
        const timeout = ms(100);
        for (const target of [k, key('missing')]) {
          const start = performance.now();
          const waiting = watch(store.waitForChange(target, timeout));
          expect(await waiting.settle(timeout + ms(10_000))).toBe('resolved');
          const elapsed = performance.now() - start;
          expect(elapsed).toBeGreaterThanOrEqual(timeout * 0.8);
        }
      },
    );

    define(
      'waitForChange (when present) resolves at once when its signal aborts and keeps no timer',
      async ({ store }) => {
        if (store.waitForChange === undefined) return;
        const k = key();
        await acquire(store, claimInput(k));
        const timers = () =>
          process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
        const before = timers();
        const cancel = new AbortController();
        const waits = Array.from({ length: 200 }, () =>
          watch(store.waitForChange!(k, ms(60_000), cancel.signal)),
        );
        await sleep(ms(20));
        cancel.abort();
        for (const wait of waits) expect(await wait.settle(ms(5_000))).toBe('resolved');
        // 200 waits that left their timers would leave 200 (or more) behind.
        expect(timers() - before).toBeLessThan(20);
        // An already aborted signal: resolved without waiting.
        const late = watch(store.waitForChange(k, ms(60_000), cancel.signal));
        expect(await late.settle(ms(5_000))).toBe('resolved');
      },
    );

    define('waitForChange (when present) does not hang after close', async ({ store }) => {
      if (store.waitForChange === undefined || store.close === undefined) return;
      const k = key();
      await acquire(store, claimInput(k));
      const pending = watch(store.waitForChange(k, ms(10_000)));
      await sleep(ms(20));
      await store.close();
      expect(SETTLED).toContain(await pending.settle(ms(5_000)));
      // A wait that starts after close does not hang either.
      const late = watch(store.waitForChange(k, ms(50)));
      expect(SETTLED).toContain(await late.settle(ms(5_000)));
    });
  });
}
