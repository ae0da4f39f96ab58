// Crash tests against the Workflow SDK's real local world: the workflows are built by the SDK's
// compiler, a worker process runs them, is SIGKILLed after the vendor effect and before the
// engine records the step, and a new worker resumes the run (the local world re-enqueues it).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildWorkflowTests } from '@workflow/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const fixture = fileURLToPath(new URL('./test-utils/fixture', import.meta.url));
const worker = fileURLToPath(new URL('./test-utils/worker.mjs', import.meta.url));
// Inside the package: the built bundles resolve `workflow` from its node_modules.
const root = mkdtempSync(fileURLToPath(new URL('../.workflow-test-', import.meta.url)));

beforeAll(async () => {
  await buildWorkflowTests({
    cwd: fixture,
    dataDir: join(root, 'build-data'),
    outDir: join(root, 'out'),
  });
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Line = {
  run?: string;
  result?: { charged: number; key: string };
  error?: string;
  status?: string;
};

let n = 0;
/** A fresh world (data, store, vendor log) sharing the built bundles. */
function world() {
  const dir = join(root, `w${n++}`);
  const env = {
    ...process.env,
    WF_DIR: root,
    WF_EFFECTS: join(dir, 'effects.log'),
    WF_DB: join(dir, 'store.db'),
  };
  const worker_ = (args: string[], crash?: string) => {
    const out = spawnSync(process.execPath, [worker, ...args], {
      env: { ...env, WF_DIR: root, WF_DATA: join(dir, 'data'), WF_CRASH: crash ?? '' },
      encoding: 'utf8',
    });
    const lines = out.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Line);
    return { signal: out.signal, lines, stderr: out.stderr };
  };
  const effects = () =>
    existsSync(env.WF_EFFECTS)
      ? readFileSync(env.WF_EFFECTS, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { kind: string; key: string })
      : [];
  /** Starts `workflow`, kills the worker at `crash`, resumes the run in a new worker. */
  const crashAndResume = (workflow: string, crash: string) => {
    const first = worker_(['start', workflow, '42'], crash);
    expect(first.signal, first.stderr).toBe('SIGKILL');
    const runId = first.lines.find((l) => l.run)?.run as string;
    expect(runId).toMatch(/^wrun_/);
    expect(effects()).toHaveLength(1); // the effect happened before the kill
    const second = worker_(['resume', runId]);
    expect(second.signal, second.stderr).toBe(null);
    return second.lines.at(-1) as Line;
  };
  return { crashAndResume, effects };
}

describe('Workflow SDK local world: a worker killed after the effect', () => {
  it('control: a plain step runs its effect again when the engine re-runs it', () => {
    const w = world();
    const last = w.crashAndResume('plainWorkflow', 'after-effect');
    expect(last.result?.charged).toBe(42);
    expect(w.effects().map((e) => e.kind)).toEqual(['plain', 'plain']);
  });

  it('idempotentStep: the re-run replays the stored outcome, the vendor is charged once', () => {
    const w = world();
    const last = w.crashAndResume('guardedWorkflow', 'after-effect');
    const [only] = w.effects();
    expect(w.effects()).toHaveLength(1);
    expect(last.result).toEqual({ charged: 42, key: only?.key });
    expect(only?.key).toMatch(/^[\x21-\x7e]{1,128}$/); // a header-safe Idempotency-Key
  });

  it('killed mid-way (effect sent, outcome not stored): reconcile adopts it, charged once', () => {
    const w = world();
    const last = w.crashAndResume('reconciledWorkflow', 'mid-way');
    const [only] = w.effects();
    expect(w.effects()).toHaveLength(1);
    expect(last.result).toEqual({ charged: 42, key: only?.key });
  });

  it('killed mid-way with no reconcile: the run fails with outcome unknown, not a second charge', () => {
    const w = world();
    const last = w.crashAndResume('guardedWorkflow', 'mid-way');
    expect(w.effects()).toHaveLength(1);
    expect(last.status).toBe('failed');
    expect(last.error).toMatch(/never finished: its effect may or may not have happened/);
  });
});
