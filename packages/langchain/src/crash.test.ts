/** Case 5: a process killed mid-turn, then the turn resumed by another process on one SQLite file. */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIdempotency } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { countEffects, runChild } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { crashAgent } from './test-utils/crash-agent.js';
import { toolResults } from './test-utils/fixtures.js';

const child = fileURLToPath(new URL('./test-utils/crash-child.ts', import.meta.url));
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'langchain-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const LEASE_MS = 1_000;

/** Run the child until it kills itself; returns the scenario's files and thread. */
async function crash(mode: 'after-effect' | 'after-persist') {
  const scenario = {
    sqliteFile: join(dir, `${randomUUID()}.db`),
    effectsFile: join(dir, `${randomUUID()}.log`),
    threadId: `thread-${randomUUID()}`,
  };
  const { signal, stderr } = await runChild(child, {
    cwd: packageDir,
    env: {
      SQLITE_FILE: scenario.sqliteFile,
      EFFECTS_FILE: scenario.effectsFile,
      THREAD_ID: scenario.threadId,
      CRASH: mode,
      LEASE_MS: String(LEASE_MS),
    },
  });
  expect({ signal, stderr }).toEqual({ signal: 'SIGKILL', stderr: '' });
  expect(countEffects(scenario.effectsFile)).toBe(1);
  return scenario;
}

/** Resume the turn in this process: same SQLite file, same thread and user message. */
async function resume(
  scenario: Awaited<ReturnType<typeof crash>>,
  policies: Parameters<typeof crashAgent>[0]['options']['policies'] = {},
) {
  const store = openSqliteStore(scenario.sqliteFile);
  try {
    const idempotency = createIdempotency({ store, lease: LEASE_MS });
    const run = crashAgent({
      effectsFile: scenario.effectsFile,
      options: { idempotency, policies },
    });
    return toolResults((await run(scenario.threadId)).messages);
  } finally {
    store.close();
  }
}

describe('(5) crash and resume, SQLite store, two processes', () => {
  test('killed after the outcome was stored: the resumed turn replays it', async () => {
    const scenario = await crash('after-persist');
    const [result] = await resume(scenario);
    expect(result?.content).toEqual({ ticketId: 'T-1', title: 'Login fails', replayed: true });
    expect(countEffects(scenario.effectsFile)).toBe(1);
  });

  test('killed after the side effect, before the outcome was stored: outcome_unknown, no second run', async () => {
    const scenario = await crash('after-effect');
    const [result] = await resume(scenario);
    expect(result?.status).toBe('error');
    expect(result?.content).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });
    expect(countEffects(scenario.effectsFile)).toBe(1);
  });

  test('killed after the side effect, with reconcile: the effect is found and adopted', async () => {
    const scenario = await crash('after-effect');
    const [result] = await resume(scenario, {
      create_ticket: {
        reconcile: async ({ args }) =>
          countEffects(scenario.effectsFile) > 0
            ? { found: true, value: { ticketId: 'T-1', title: args.title } }
            : { found: false },
      },
    });
    expect(result?.content).toEqual({ ticketId: 'T-1', title: 'Login fails', replayed: true });
    expect(result?.metadata?.idempotency).toMatchObject({ outcome: 'reconciled' });
    expect(countEffects(scenario.effectsFile)).toBe(1);
  });
});
