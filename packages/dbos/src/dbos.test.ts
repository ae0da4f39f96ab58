/**
 * idempotentStep in real DBOS (@dbos-inc/dbos-sdk, its system database on the local
 * PostgreSQL, a throwaway database per run): a worker SIGKILLed inside the charge, before DBOS
 * checkpointed the step, and a new worker process whose DBOS.launch() recovers the workflow.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type CrashFiles,
  type CrashPoint,
  countEffects,
  newScenarioFiles,
  runChild,
  runCrashCases,
  serviceAvailable,
} from '@idempotent-tools/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const child = fileURLToPath(new URL('./test-utils/dbos-crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const database = `dbos_test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
const systemUrl = new URL(DATABASE_URL);
systemUrl.pathname = `/${database}`;
const LEASE_MS = 1_000;

const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
admin.on('error', () => {});
const postgresUp = await serviceAvailable({
  name: 'PostgreSQL',
  url: DATABASE_URL,
  probe: () => admin.query('SELECT 1'),
});
beforeAll(async () => {
  if (postgresUp) await admin.query(`CREATE DATABASE ${database}`);
});
afterAll(async () => {
  if (postgresUp) await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

/** One worker process: `start` (kills itself at `crash`) or `recover`. */
async function worker(
  mode: 'start' | 'recover',
  files: CrashFiles & { workflowID: string },
  extra: Record<string, string> = {},
) {
  const result = await runChild(child, {
    cwd: packageDir,
    env: {
      MODE: mode,
      SYSTEM_DATABASE_URL: systemUrl.href,
      SQLITE_FILE: files.dbPath,
      EFFECTS_FILE: files.effectsFile,
      WORKFLOW_ID: files.workflowID,
      LEASE_MS: String(LEASE_MS),
      ...extra,
    },
  });
  const line = result.stdout.trim().split('\n').filter(Boolean).at(-1);
  const reply = line === undefined ? undefined : (JSON.parse(line) as Record<string, unknown>);
  return { ...result, reply };
}

/** The workflow of one case: named after the case's fresh folder. */
const withWorkflow = (files: CrashFiles) => ({
  ...files,
  workflowID: `checkout-${basename(dirname(files.effectsFile))}`,
});

runCrashCases({
  name: 'idempotentStep (DBOS recovers the workflow in a new process)',
  describe: postgresUp ? describe : describe.skip,
  test,
  expect,
  createDriver: () => ({
    crash: async (at: CrashPoint, files: CrashFiles) =>
      worker('start', withWorkflow(files), { CRASH: at }),
    resume: async (files, { reconcile }) => {
      const recovered = await worker('recover', withWorkflow(files), {
        RECONCILE: reconcile ? '1' : '0',
      });
      expect(recovered.code, recovered.stderr).toBe(0);
      const reply = recovered.reply as {
        value?: { receipt: { chargeId: string } };
        error?: { code?: string };
      };
      if (reply.error?.code === 'outcome_unknown') return { outcomeUnknown: true };
      if (reply.value?.receipt.chargeId === 'ch_reconciled')
        return { reconciled: true, value: reply.value };
      if (reply.value !== undefined) return { replayed: true, value: reply.value };
      throw new Error(`unexpected reply: ${JSON.stringify(reply)}`);
    },
  }),
});

describe.skipIf(!postgresUp)('the same crash in DBOS alone', () => {
  const files = (): CrashFiles & { workflowID: string } => {
    const { effectsFile, turnId } = newScenarioFiles();
    return { dbPath: join(dirname(effectsFile), 'agent.db'), effectsFile, workflowID: turnId };
  };

  test('a plain DBOS step killed after the effect charges twice (at-least-once)', async () => {
    const f = files();
    const crashed = await worker('start', f, { CRASH: 'after-effect', STEP: 'plain' });
    expect(crashed.signal).toBe('SIGKILL');
    expect(countEffects(f.effectsFile)).toBe(1);
    const recovered = await worker('recover', f, { STEP: 'plain' });
    expect(recovered.reply).toMatchObject({ value: { shipped: 'shipped o-1' } });
    expect(countEffects(f.effectsFile)).toBe(2);
  });

  test('idempotentStep: the recovered step sends the vendor the same Idempotency-Key, once', async () => {
    const f = files();
    await worker('start', f, { CRASH: 'after-persist' });
    const recovered = await worker('recover', f);
    const [line, ...more] = readFileSync(f.effectsFile, 'utf8').split('\n').filter(Boolean);
    expect(more).toEqual([]);
    const { idempotencyKey } = JSON.parse(line as string) as { idempotencyKey: string };
    expect(idempotencyKey).toMatch(/^v1_/);
    expect(recovered.reply).toEqual({
      value: { receipt: { chargeId: 'ch_o-1', idempotencyKey }, shipped: 'shipped o-1' },
    });
  });
});
