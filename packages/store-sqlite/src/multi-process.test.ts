import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  countEffects,
  newScenarioFiles,
  runWorkers,
  sleep,
  type WorkerReport,
} from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { openSqliteStore } from './index.js';
import { betterTest, driverTest } from './test-utils/better-sqlite3.js';

const storeModule = fileURLToPath(new URL('./test-utils/worker-store.ts', import.meta.url));
const claimRace = fileURLToPath(new URL('./test-utils/claim-race.ts', import.meta.url));
const writeLoad = fileURLToPath(new URL('./test-utils/write-load.ts', import.meta.url));
const execArgv = ['--import', 'tsx'];
const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-processes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Driver = 'node:sqlite' | 'better-sqlite3';
const env = (file: string, driver: Driver = 'node:sqlite') => ({
  SQLITE_STORE_FILE: file,
  SQLITE_STORE_DRIVER: driver,
});
const newFile = () => join(dir, `${randomUUID()}.db`);

function expectOneExecution(reports: WorkerReport[], effectsFile: string, calls: number): void {
  for (const report of reports) expect(report.stderr).toBe('');
  const results = reports.flatMap((r) => r.results);
  expect(results).toHaveLength(calls);
  expect(results.filter((r) => !r.ok)).toEqual([]);
  expect(countEffects(effectsFile)).toBe(1);
  expect(results.filter((r) => r.replayed === false)).toHaveLength(1);
  const [effect] = readFileSync(effectsFile, 'utf8').split('\n');
  for (const result of results) expect(result.value).toEqual({ effect });
}

describe('sqlite store across processes (one file)', () => {
  test('4 processes x 250 concurrent calls (node:sqlite): one execution, one value', async () => {
    const { effectsFile, turnId } = newScenarioFiles();
    const reports = await runWorkers({
      kind: 'race',
      processes: 4,
      calls: 250,
      storeModule,
      execArgv,
      env: env(newFile()),
      effectsFile,
      turnId,
    });
    expectOneExecution(reports, effectsFile, 1000);
  });

  betterTest(
    '2 node:sqlite + 2 better-sqlite3 processes x 250 calls on one file: one execution',
    async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const file = newFile();
      const startAt = Date.now() + 2000;
      const reports = (
        await Promise.all(
          (['node:sqlite', 'better-sqlite3'] as const).map((driver) =>
            runWorkers({
              kind: 'race',
              processes: 2,
              calls: 250,
              storeModule,
              execArgv,
              env: env(file, driver),
              effectsFile,
              turnId,
              startAt,
            }),
          ),
        )
      ).flat();
      expectOneExecution(reports, effectsFile, 1000);
    },
  );

  betterTest(
    'raw claims: 4 processes (both drivers) claim the same 2000 keys, each acquired once',
    async () => {
      const file = newFile();
      const startAt = Date.now() + 1500;
      const runs = await Promise.all(
        (['node:sqlite', 'better-sqlite3', 'node:sqlite', 'better-sqlite3'] as const).map(
          (driver) =>
            runScript(claimRace, { ...env(file, driver), KEYS: '2000', START_AT: String(startAt) }),
        ),
      );
      const acquired = runs.flatMap((run) => {
        expect(run.stderr).toBe('');
        return (JSON.parse(run.stdout) as { acquired: string[] }).acquired;
      });
      expect(acquired).toHaveLength(2000);
      expect(new Set(acquired).size).toBe(2000);
    },
  );

  betterTest(
    'write contention: 4 processes x 250 fresh calls each, no SQLITE_BUSY surfaces',
    async () => {
      const file = newFile();
      const startAt = Date.now() + 1500;
      const runs = await Promise.all(
        (['node:sqlite', 'better-sqlite3', 'node:sqlite', 'better-sqlite3'] as const).map(
          (driver) =>
            runScript(writeLoad, { ...env(file, driver), CALLS: '250', START_AT: String(startAt) }),
        ),
      );
      for (const run of runs) {
        expect(run.stderr).toBe('');
        expect(JSON.parse(run.stdout)).toEqual({ executed: 250, replayed: 250, errors: [] });
      }
      const store = openSqliteStore(file);
      const rows = store.database.prepare(`SELECT count(*) AS n FROM ${store.table}`).get();
      expect(rows).toEqual({ n: 1000 });
      await store.close();
    },
  );

  for (const driver of ['node:sqlite', 'better-sqlite3'] as const) {
    driverTest(driver)(
      `crash after the effect, before the outcome is stored (${driver}): outcome_unknown, then reconcile`,
      async () => {
        const { effectsFile, turnId } = newScenarioFiles();
        const common = { storeModule, execArgv, env: env(newFile(), driver), effectsFile, turnId };
        const [crashed] = await runWorkers({
          ...common,
          kind: 'crash-after-effect',
          leaseMs: 1_000,
        });
        expect(crashed?.signal).toBe('SIGKILL');
        expect(crashed?.results).toEqual([]);
        expect(countEffects(effectsFile)).toBe(1);

        await sleep(1_300); // the dead attempt's lease runs out
        const [retry] = await runWorkers({ ...common, kind: 'retry', leaseMs: 1_000 });
        expect(retry?.results).toMatchObject([{ ok: false, code: 'outcome_unknown' }]);
        expect(countEffects(effectsFile)).toBe(1);

        const [effect] = readFileSync(effectsFile, 'utf8').split('\n');
        const [reconciled] = await runWorkers({ ...common, kind: 'retry', reconcile: true });
        expect(reconciled?.results).toEqual([
          { ok: true, value: { effect }, replayed: true, outcome: 'reconciled' },
        ]);
        const [replayed] = await runWorkers({ ...common, kind: 'retry' });
        expect(replayed?.results).toEqual([
          { ok: true, value: { effect }, replayed: true, outcome: 'replayed' },
        ]);
        expect(countEffects(effectsFile)).toBe(1);
      },
    );

    driverTest(driver)(
      `crash after the outcome is stored (${driver}): the retry replays it`,
      async () => {
        const { effectsFile, turnId } = newScenarioFiles();
        const common = { storeModule, execArgv, env: env(newFile(), driver), effectsFile, turnId };
        const [crashed] = await runWorkers({ ...common, kind: 'crash-after-persist' });
        expect(crashed?.signal).toBe('SIGKILL');
        expect(crashed?.results).toEqual([]);

        const [effect] = readFileSync(effectsFile, 'utf8').split('\n');
        const [retry] = await runWorkers({ ...common, kind: 'retry' });
        expect(retry?.results).toEqual([
          { ok: true, value: { effect }, replayed: true, outcome: 'replayed' },
        ]);
        expect(countEffects(effectsFile)).toBe(1);
      },
    );
  }
});

function runScript(
  script: string,
  extraEnv: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...execArgv, script], {
      env: { ...process.env, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
