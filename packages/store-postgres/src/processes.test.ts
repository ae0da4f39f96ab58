import { fileURLToPath } from 'node:url';
import {
  countEffects,
  newScenarioFiles,
  type RunWorkersOptions,
  runWorkers,
  sleep,
} from '@idempotent-tools/testing';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPostgresStore } from './postgres-store.js';
import { postgresUp, testPool, uniqueName } from './test-utils/pg.js';

const pool = testPool({ label: 'processes', max: 2 });
const up = await postgresUp(pool);
const schema = uniqueName('idt_test_proc');
const table = 'records';
const storeModule = fileURLToPath(new URL('./test-utils/worker-store.ts', import.meta.url));

beforeAll(async () => {
  if (!up) return;
  await pool.query(`CREATE SCHEMA ${schema}`);
  await createPostgresStore(pool, { schema, table }).ensureSchema();
});

afterAll(async () => {
  if (up) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

/**
 * Per driver that other processes can reach: pg and postgres.js (each worker its own client).
 * PGlite is not here: its database lives inside one process, which no other process can open.
 */
describe.skipIf(!up).each([['pg'], ['postgres.js']] as const)(
  'postgres store on %s across OS processes',
  (driver) => {
    const workers = (options: RunWorkersOptions) =>
      runWorkers({
        execArgv: ['--import', 'tsx'],
        env: { IDT_PG_SCHEMA: schema, IDT_PG_TABLE: table, IDT_PG_DRIVER: driver },
        ...options,
      });

    test('race: 4 processes x 250 concurrent calls run the tool once, all get its value', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const reports = await workers({
        kind: 'race',
        processes: 4,
        calls: 250,
        storeModule,
        effectsFile,
        turnId,
      });
      for (const report of reports) expect(report.exitCode, report.stderr).toBe(0);
      const results = reports.flatMap((report) => report.results);
      expect(results).toHaveLength(1000);
      expect(countEffects(effectsFile)).toBe(1);
      expect(results.filter((r) => !r.ok)).toEqual([]);
      expect(results.filter((r) => r.replayed === false)).toHaveLength(1);
      const values = new Set(results.map((r) => JSON.stringify(r.value)));
      expect(values.size).toBe(1);
    });

    test('crash after the effect: outcome_unknown once the lease ran out, reconcile adopts it', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const scenario = { storeModule, effectsFile, turnId, leaseMs: 1_000 };
      const [crashed] = await workers({ kind: 'crash-after-effect', ...scenario });
      expect(crashed?.signal).toBe('SIGKILL');
      expect(crashed?.results).toEqual([]);
      expect(countEffects(effectsFile)).toBe(1);

      await sleep(1_300); // the dead attempt's lease runs out: the record is stale
      const [unknown] = await workers({ kind: 'retry', ...scenario });
      expect(unknown?.results[0]).toMatchObject({ ok: false, code: 'outcome_unknown' });
      expect(countEffects(effectsFile)).toBe(1);

      const [reconciled] = await workers({ kind: 'retry', reconcile: true, ...scenario });
      const effect = { effect: 'crash-after-effect' };
      expect(reconciled?.results[0]).toMatchObject({ ok: true, replayed: true });
      const value = reconciled?.results[0]?.value as { effect: string };
      expect(value.effect.startsWith(effect.effect)).toBe(true);

      // The adopted outcome is stored: a plain retry replays it.
      const [replayed] = await workers({ kind: 'retry', ...scenario });
      expect(replayed?.results[0]).toMatchObject({ ok: true, replayed: true, value });
      expect(countEffects(effectsFile)).toBe(1);
    });

    test('crash after the outcome was stored: the retry replays it', async () => {
      const { effectsFile, turnId } = newScenarioFiles();
      const scenario = { storeModule, effectsFile, turnId };
      const [crashed] = await workers({ kind: 'crash-after-persist', ...scenario });
      expect(crashed?.signal).toBe('SIGKILL');
      expect(countEffects(effectsFile)).toBe(1);

      const [retry] = await workers({ kind: 'retry', ...scenario });
      expect(retry?.results[0]).toMatchObject({ ok: true, replayed: true, outcome: 'replayed' });
      const value = retry?.results[0]?.value as { effect: string };
      expect(value.effect.startsWith('crash-after-persist-')).toBe(true);
      expect(countEffects(effectsFile)).toBe(1);
    });
  },
);
