import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  countEffects,
  newScenarioFiles as newFiles,
  runWorkers,
  serviceAvailable,
  sleep,
} from '@idempotent-tools/testing';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { DRIVERS } from './test-utils/drivers.js';
import { dropKeys, testPrefix } from './test-utils/keys.js';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
redis.on('error', () => {});
const up = await serviceAvailable({
  name: 'Redis',
  url,
  probe: async () => {
    await redis.connect();
    return redis.ping();
  },
});

const prefix = testPrefix('processes');
const storeModule = fileURLToPath(new URL('./test-utils/worker-store.ts', import.meta.url));
/** The workers build their store on the client of `driver` (see `worker-store.ts`). */
const workersOn = (driver: string) => ({
  storeModule,
  execArgv: ['--import', 'tsx'],
  env: { REDIS_URL: url, IDEM_REDIS_PREFIX: prefix, IDEM_REDIS_DRIVER: driver },
});

/** Scenario files, removed after the run. */
const effectDirs: string[] = [];
function newScenarioFiles() {
  const files = newFiles();
  effectDirs.push(dirname(files.effectsFile));
  return files;
}

afterAll(async () => {
  for (const dir of effectDirs) rmSync(dir, { recursive: true, force: true });
  if (!up) return;
  await dropKeys(redis, prefix);
  await redis.quit();
});

for (const driver of DRIVERS) {
  describe.skipIf(!up)(`redis store on ${driver.name} across OS processes`, () => {
    const workers = workersOn(driver.name);
    test('4 processes x 250 concurrent calls on one key: one execution, one value for all', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const started = performance.now();
      const reports = await runWorkers({
        ...workers,
        kind: 'race',
        processes: 4,
        calls: 250,
        effectMs: 200,
        effectsFile,
        turnId,
      });
      const elapsed = performance.now() - started;
      const results = reports.flatMap((r) => r.results);
      for (const report of reports) expect(report.exitCode, report.stderr).toBe(0);
      expect(results).toHaveLength(1000);
      expect(countEffects(effectsFile)).toBe(1);
      expect(results.filter((r) => !r.ok)).toEqual([]);
      const values = new Set(results.map((r) => JSON.stringify(r.value)));
      expect(values.size).toBe(1);
      expect(results.filter((r) => r.replayed === false)).toHaveLength(1);
      // The time is logged, not asserted: it is mostly the start of four Node processes, which a
      // loaded machine stretches at will. That the waiters are woken by the message, not a timer,
      // is proven in redis-store.test.ts and wake-up.test.ts; a hang here ends in the workers'
      // 60 s kill, and the exit codes above.
      console.info(
        `[store-redis] ${driver.name} race: 4 x 250 calls, 1 execution, ${Math.round(elapsed)} ms in all (1.5 s start barrier, 200 ms effect)`,
      );
    });

    test('crash after the effect: the retry reports outcome_unknown, reconcile adopts the effect', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const scenario = { ...workers, effectsFile, turnId, leaseMs: 1_000 };
      const [crashed] = await runWorkers({ ...scenario, kind: 'crash-after-effect' });
      expect(crashed!.signal).toBe('SIGKILL');
      expect(countEffects(effectsFile)).toBe(1);

      await sleep(1_300); // the lease runs out: the record is stale
      const [retry] = await runWorkers({ ...scenario, kind: 'retry' });
      expect(retry!.results).toEqual([
        expect.objectContaining({ ok: false, code: 'outcome_unknown' }),
      ]);
      expect(countEffects(effectsFile)).toBe(1);

      const [reconciled] = await runWorkers({ ...scenario, kind: 'retry', reconcile: true });
      const first = readFileSync(effectsFile, 'utf8').split('\n')[0];
      expect(reconciled!.results).toEqual([
        expect.objectContaining({
          ok: true,
          replayed: true,
          outcome: 'reconciled',
          value: { effect: first },
        }),
      ]);
      const [replayed] = await runWorkers({ ...scenario, kind: 'retry' });
      expect(replayed!.results).toEqual([
        expect.objectContaining({
          ok: true,
          replayed: true,
          outcome: 'replayed',
          value: { effect: first },
        }),
      ]);
      expect(countEffects(effectsFile)).toBe(1);
    });

    test('crash after the outcome is stored: the retry replays it', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const scenario = { ...workers, effectsFile, turnId };
      const [crashed] = await runWorkers({ ...scenario, kind: 'crash-after-persist' });
      expect(crashed!.signal).toBe('SIGKILL');
      expect(crashed!.results).toEqual([]);
      const [retry] = await runWorkers({ ...scenario, kind: 'retry' });
      expect(retry!.results).toEqual([expect.objectContaining({ ok: true, replayed: true })]);
      const effect = readFileSync(effectsFile, 'utf8').split('\n')[0]!;
      expect((retry!.results[0]!.value as { effect: string }).effect).toBe(effect);
      expect(countEffects(effectsFile)).toBe(1);
    });
  });
}
