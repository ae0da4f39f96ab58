import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  countEffects,
  newScenarioFiles as newFiles,
  runWorkers,
  sleep,
} from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { startEngine, testPrefix } from './test-utils/engine.js';

// One engine (dynalite in this process, or DYNAMODB_ENDPOINT), many client processes.
const engine = await startEngine();
const table = await engine.table('processes');
const storeModule = fileURLToPath(new URL('./test-utils/worker-store.ts', import.meta.url));
const workers = {
  storeModule,
  execArgv: ['--import', 'tsx'],
  env: {
    DYNAMODB_ENDPOINT: engine.endpoint,
    IDEM_DYNAMODB_TABLE: table,
    IDEM_DYNAMODB_PREFIX: testPrefix('processes'),
  },
};

/** Scenario files, removed after the run. */
const effectDirs: string[] = [];
function newScenarioFiles() {
  const files = newFiles();
  effectDirs.push(dirname(files.effectsFile));
  return files;
}

afterAll(async () => {
  for (const dir of effectDirs) rmSync(dir, { recursive: true, force: true });
  await engine.stop();
});

describe(`dynamodb store across OS processes (${engine.kind})`, () => {
  test('4 processes x 100 concurrent calls on one key: one execution, one value for all', async () => {
    const { effectsFile, turnId } = newScenarioFiles();
    const reports = await runWorkers({
      ...workers,
      kind: 'race',
      processes: 4,
      calls: 100,
      effectMs: 200,
      effectsFile,
      turnId,
    });
    const results = reports.flatMap((r) => r.results);
    for (const report of reports) expect(report.exitCode, report.stderr).toBe(0);
    expect(results).toHaveLength(400);
    expect(countEffects(effectsFile)).toBe(1);
    expect(results.filter((r) => !r.ok)).toEqual([]);
    expect(new Set(results.map((r) => JSON.stringify(r.value))).size).toBe(1);
    expect(results.filter((r) => r.replayed === false)).toHaveLength(1);
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
      expect.objectContaining({ ok: true, replayed: true, outcome: 'replayed' }),
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
