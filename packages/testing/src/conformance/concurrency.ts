import { createIdempotency, type IdempotencyStore } from '@idempotent-tools/core';
import { sleep } from '../clock.js';
import { HANG_DETECTOR_MS } from '../fixture-tests.js';
import { FP_A, FP_B, LONG_LEASE } from './shared.js';
import type { ConformanceContext } from './types.js';

/** Races: one call runs once, one claim acquires, one of two competing writes wins. */
export function defineConcurrencyTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define, concurrency, executorConcurrency } = ctx;
  const { key, claimInput, expectStatus, mustGet, completeInput, count } = ctx.fixture;
  const { acquireOwners, raceTakeovers } = ctx.fixture;

  describe('concurrency', () => {
    define(
      `executor: ${executorConcurrency} concurrent calls of one tool call run it once, and every caller gets its outcome`,
      async ({ store }) => {
        const idempotency = createIdempotency({ store });
        const call = { toolName: 'conformance', turnId: key(), args: { amount: 1 } };
        let runs = 0;
        const results = await Promise.all(
          Array.from({ length: executorConcurrency }, () =>
            idempotency.run(
              call,
              async () => {
                runs++;
                await sleep(20);
                return { run: runs };
              },
              // The waiters wait as long as the storm takes on this machine (not the 30 s default).
              { waitTimeout: HANG_DETECTOR_MS },
            ),
          ),
        );
        expect(runs).toBe(1);
        expect(results.filter((r) => !r.replayed).length).toBe(1);
        expect(results.every((r) => JSON.stringify(r.value) === '{"run":1}')).toBe(true);
      },
    );
    define(
      `concurrent claims on one key: exactly one acquires, the others see in_progress`,
      async ({ store }) => {
        const k = key();
        const inputs = Array.from({ length: concurrency }, () => claimInput(k));
        const results = await Promise.all(inputs.map((input) => store.claim(input)));
        expect(count(results, 'acquired')).toBe(1);
        expect(count(results, 'in_progress')).toBe(concurrency - 1);
        const winner = inputs[results.findIndex((r) => r.status === 'acquired')]!;
        for (const result of results) expect(result.record.token).toBe(winner.token);
        expect((await mustGet(store, k)).token).toBe(winner.token);
      },
    );

    define(
      'concurrent claims with two fingerprints on one key: one acquires, the rest see in_progress or drift',
      async ({ store }) => {
        const k = key();
        const inputs = Array.from({ length: concurrency }, (_, i) =>
          claimInput(k, { fingerprint: i % 2 === 0 ? FP_A : FP_B }),
        );
        const results = await Promise.all(inputs.map((input) => store.claim(input)));
        expect(count(results, 'acquired')).toBe(1);
        const winner = inputs[results.findIndex((r) => r.status === 'acquired')]!;
        for (const [i, result] of results.entries()) {
          if (result.status === 'acquired') continue;
          const same = inputs[i]!.fingerprint === winner.fingerprint;
          expect(result.status).toBe(same ? 'in_progress' : 'drift');
          expect(result.record.token).toBe(winner.token);
        }
      },
    );

    define('concurrent claims on distinct keys all acquire', async ({ store }) => {
      const base = key();
      const inputs = Array.from({ length: concurrency }, (_, i) => claimInput(`${base}-${i}`));
      const results = await Promise.all(inputs.map((input) => store.claim(input)));
      expect(count(results, 'acquired')).toBe(concurrency);
      const records = await Promise.all(inputs.map((input) => store.get(input.key)));
      for (const [i, record] of records.entries()) expect(record?.token).toBe(inputs[i]!.token);
    });

    define('concurrent complete and release by the owner: exactly one wins', async ({ store }) => {
      const owners = await acquireOwners(store);
      const races = await Promise.all(
        owners.map((input) =>
          Promise.all([
            store.complete(completeInput(input.key, input.token, 'completed', '"won"')),
            store.release(input.key, input.token),
          ]),
        ),
      );
      for (const [i, [completed, released]] of races.entries()) {
        expect(Number(completed) + Number(released)).toBe(1);
        const record = await store.get(owners[i]!.key);
        if (completed) expect(record?.state).toBe('completed');
        else expect(record).toBeUndefined();
      }
    });

    define(
      'concurrent renew by the stale owner and takeover: exactly one wins',
      async ({ store, clock }) => {
        const { owners, takers, races } = await raceTakeovers(store, clock, (input) =>
          store.renew(input.key, input.token, LONG_LEASE),
        );
        for (const [i, [renewed, taken]] of races.entries()) {
          expect(Number(renewed) + Number(taken)).toBe(1);
          const record = await mustGet(store, owners[i]!.key);
          expect(record.token).toBe(taken ? takers[i] : owners[i]!.token);
          expectStatus(await store.claim(claimInput(owners[i]!.key)), 'in_progress');
        }
      },
    );
  });
}
