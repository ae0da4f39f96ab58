/**
 * The chaos soak's short form, inside `pnpm test` so it cannot rot: per store a few hundred keys
 * on 4 workers, every fault at least once (worker SIGKILL, random SIGSTOP past the lease, engine
 * crash + restart, a targeted freeze at each point of the tool for each vendor). The run waits
 * until every planned fault has happened, so nothing here depends on how fast the machine is: the
 * assertions are the invariants and what each targeted freeze must leave at the vendor.
 */
import { serviceAvailable } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { engineMissing } from './engines.ts';
import { details, historyText } from './report.ts';
import { runSoak } from './soak.ts';
import { FREEZE_PHASES, STORE_KINDS, VENDORS } from './types.ts';

const SHORT = {
  workers: 4,
  keys: 200,
  seconds: 3,
  maxFrozen: 2,
  killEveryMs: 1_000,
  stopEveryMs: 1_500,
  restartEveryMs: 2_500,
  // The targeted freezes are the planned ones (each point x each vendor); the stops are random.
  targetedShare: 0,
  // The load goes on until every planned key and fault happened: a quiet machine needs ~30 s, one
  // whose cores are both taken by other work (load average 25 seen) several minutes.
  hardCapSeconds: 900,
};

/**
 * What the vendor must have seen for the key of each targeted freeze: effects (and, for the
 * deduping vendor, at least that many raw requests).
 * - before the check: the holder must not call the vendor once its lease ran out (1 effect);
 * - between the check and the request: the limit no check closes; the plain vendor sees 2
 *   effects (the harness must catch and classify it), the deduping vendor dedupes them;
 * - after the vendor replied: the successor adopts that effect (reconcile / the vendor's replay).
 */
const EXPECTED: Record<string, { effects: number; minRequests: number }> = {
  'before-check/plain': { effects: 1, minRequests: 1 },
  'before-check/dedupe': { effects: 1, minRequests: 1 },
  'after-check/plain': { effects: 2, minRequests: 2 },
  'after-check/dedupe': { effects: 1, minRequests: 2 },
  'after-effect/plain': { effects: 1, minRequests: 1 },
  'after-effect/dedupe': { effects: 1, minRequests: 2 },
};

const sorted = <T>(record: Record<string, T>) =>
  Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));

for (const store of STORE_KINDS) {
  const available = await serviceAvailable({
    name: `the ${store} engine for the chaos soak`,
    url: 'PATH',
    probe: async () => {
      const missing = await engineMissing(store);
      if (missing !== undefined) throw new Error(missing);
    },
  });

  describe.skipIf(!available)(`chaos soak, short form: ${store}`, () => {
    // The run waits for every planned fault; the bound only stops a broken one.
    test('exactly one effect per key under kills, stalls, freezes and engine restarts', {
      timeout: 1_200_000,
    }, async () => {
      const result = await runSoak({ store, ...SHORT });
      if (result.verdict !== 'PASS') console.log(details([result]));

      // Every fault happened (the run waits for them).
      expect(result.faults.kills).toBeGreaterThan(0);
      expect(result.faults.stops).toBeGreaterThan(0);
      if (store !== 'sqlite') expect(result.faults.engineRestarts).toBeGreaterThan(0);
      const planned = FREEZE_PHASES.flatMap((p) => VENDORS.map((v) => `${p}/${v}`)).sort();
      expect(Object.keys(result.faults.targetedFired).sort()).toEqual(planned);

      // What each targeted freeze left at the vendor.
      const seen: Record<string, { effects: number; minRequests: number }> = {};
      for (const name of planned) {
        const keys = result.targeted.filter((t) => `${t.phase}/${t.vendor}` === name);
        seen[name] = {
          effects: Math.max(...keys.map((t) => t.effects)),
          minRequests: Math.min(
            EXPECTED[name]!.minRequests,
            Math.min(...keys.map((t) => t.requests)),
          ),
        };
      }
      if (JSON.stringify(seen) !== JSON.stringify(sorted(EXPECTED))) {
        for (const t of result.targeted) if (t.history) console.log(historyText(t.history));
      }
      expect(seen).toEqual(EXPECTED);
      const midRequest = result.targeted.find(
        (t) => t.phase === 'after-check' && t.vendor === 'plain',
      );
      expect(midRequest?.cause).toBe('frozen-mid-request');

      // The invariants: no failure of any kind.
      expect(result.failures).toEqual([]);
      expect(result.invariants.duplicates.dedupe).toEqual({
        'frozen-mid-request': 0,
        'stalled-holder': 0,
        'engine-restart': 0,
        other: 0,
      });
      expect(result.verdict).toBe('PASS');
    });
  });
}
