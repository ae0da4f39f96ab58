/**
 * The fault checker's short form, inside `pnpm test` so it cannot rot: a fixed seed, a bounded
 * schedule (a hundred-odd keys under every configuration, every fault the engine takes at least
 * once) on SQLite and Redis, and one planted bug the checker must catch. The run waits until
 * every scheduled call and fault happened: nothing here depends on how fast the machine is; the
 * timeouts are hang detectors only.
 */
import { serviceAvailable } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import type { RunResult } from './analyze.ts';
import { scheduleFor } from './cli.ts';
import { engineMissing } from './engines.ts';
import { details } from './report.ts';
import { runSchedule } from './run.ts';
import { CONFIGS, type Target, targetName } from './types.ts';

const SHORT = { seed: 26, workers: 3, keys: 120, seconds: 8, configs: [...CONFIGS] };
const TARGETS: Target[] = [
  { store: 'sqlite', driver: 'node:sqlite' },
  { store: 'redis', driver: 'ioredis' },
];

const show = (result: RunResult) => {
  if (result.verdict !== 'PASS') console.log(details([result]));
};

for (const target of TARGETS) {
  const available = await serviceAvailable({
    name: `the ${targetName(target)} engine for the fault checker`,
    url: 'PATH',
    probe: async () => {
      const missing = await engineMissing(target);
      if (missing !== undefined) throw new Error(missing);
    },
  });

  describe.skipIf(!available)(`fault checker, short form: ${targetName(target)}`, () => {
    test('no duplicate, wrong replay, lost result or stuck key under every fault', {
      timeout: 600_000,
    }, async () => {
      const schedule = await scheduleFor(target, SHORT);
      const result = await runSchedule({ schedule });
      show(result);
      // Every fault kind the engine takes was scheduled, and fired.
      const kinds = new Set(schedule.faults.map((f) => f.kind));
      for (const kind of ['kill', 'stop', 'outage', 'clock', 'vendor'] as const) {
        expect(kinds.has(kind)).toBe(true);
      }
      if (target.store === 'redis') {
        expect(kinds.has('proxy')).toBe(true);
        expect(kinds.has('restart')).toBe(true);
      }
      for (const kind of kinds) expect(result.faults[kind] ?? 0).toBeGreaterThan(0);
      expect(Object.keys(result.faults).some((k) => k.startsWith('freeze'))).toBe(true);
      // Every configuration ran and had effects.
      for (const config of CONFIGS) expect(result.perConfig[config]?.effects).toBeGreaterThan(0);
      expect(result.anomalies).toEqual([]);
      expect(result.failures).toEqual([]);
      expect(result.verdict).toBe('PASS');
    });
  });
}

const sqlite = TARGETS[0]!;
describe.skipIf((await engineMissing(sqlite)) !== undefined)('the checker can fail', () => {
  test("a store that replays another key's record is caught as a wrong replay", {
    timeout: 600_000,
  }, async () => {
    const schedule = await scheduleFor(sqlite, { ...SHORT, mutation: 'other-key-replayed' });
    const result = await runSchedule({ schedule });
    expect(result.verdict).toBe('FAIL');
    expect(result.anomalies.some((a) => a.kind === 'wrong-replay')).toBe(true);
  });
});
