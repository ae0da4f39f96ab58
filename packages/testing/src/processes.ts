// Kept in the emitted .d.ts, which names Node types: a strict project without @types/node of
// its own still gets them (this package depends on @types/node).
/// <reference types="node" preserve="true" />
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What a worker process does. */
export interface WorkerScenario {
  /**
   * - `race`: `calls` concurrent calls of one tool call.
   * - `crash-after-effect`: the tool's side effect happens, then the process is SIGKILLed before
   *   the outcome is stored.
   * - `crash-after-persist`: the outcome is stored, then the process is SIGKILLed before replying.
   * - `retry`: one more call (the agent's retry, from a new process).
   */
  kind: 'race' | 'crash-after-effect' | 'crash-after-persist' | 'retry';
  /** Absolute path or file URL of a module exporting `createStore(): Promise<{ store, close? }>`. */
  storeModule: string;
  /** File the side effect appends a line to: its line count is the number of executions. */
  effectsFile: string;
  toolName: string;
  turnId: string;
  args: unknown;
  calls?: number;
  /** How long the side effect takes, ms. @default 20 */
  effectMs?: number;
  /** Lease of the executor, ms. @default 30000 */
  leaseMs?: number;
  /** Retry with a `reconcile` that adopts the first recorded effect. */
  reconcile?: boolean;
  /** Wall-clock time at which every worker starts its calls. */
  startAt?: number;
}

export interface WorkerCallResult {
  ok: boolean;
  value?: unknown;
  replayed?: boolean;
  outcome?: string;
  /** `IdempotencyError` code when the call failed. */
  code?: string;
  message?: string;
}

export interface WorkerReport {
  /** Exit code, or null when killed. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Call results; empty when the process died before replying. */
  results: WorkerCallResult[];
  stderr: string;
}

export interface RunWorkersOptions
  extends Omit<WorkerScenario, 'effectsFile' | 'toolName' | 'turnId' | 'args'> {
  /** Number of OS processes. @default 1 */
  processes?: number;
  effectsFile?: string;
  toolName?: string;
  turnId?: string;
  args?: unknown;
  /** Extra `node` flags, e.g. `['--import', 'tsx']` to load a TypeScript store module. */
  execArgv?: string[];
  /** Extra environment for the workers (connection URLs). */
  env?: Record<string, string>;
  /** Kill a worker that runs longer than this, ms (a hang detector). @default 600000 */
  timeoutMs?: number;
}

/** Create a fresh side-effects file path and tool call for one scenario. */
export function newScenarioFiles(): { effectsFile: string; turnId: string } {
  return {
    effectsFile: join(mkdtempSync(join(tmpdir(), 'idempotent-tools-')), 'effects.log'),
    turnId: `turn-${randomUUID()}`,
  };
}

/** Lines in the effects file: how many times the side effect really ran. */
export function countEffects(effectsFile: string): number {
  return existsSync(effectsFile)
    ? readFileSync(effectsFile, 'utf8').split('\n').filter(Boolean).length
    : 0;
}

/**
 * Run a scenario in `processes` OS processes at once and collect their reports. The building block
 * of the multi-process race (`kind: 'race'`) and crash tests (`crash-after-effect`, then `retry`).
 */
export async function runWorkers(options: RunWorkersOptions): Promise<WorkerReport[]> {
  const processes = options.processes ?? 1;
  const workerPath = fileURLToPath(new URL('./worker.js', import.meta.url));
  const scenario: WorkerScenario = {
    kind: options.kind,
    storeModule: options.storeModule,
    effectsFile: options.effectsFile ?? newScenarioFiles().effectsFile,
    toolName: options.toolName ?? 'charge_card',
    turnId: options.turnId ?? `turn-${randomUUID()}`,
    args: options.args ?? { amount: 1999, currency: 'usd' },
    ...(options.calls === undefined ? {} : { calls: options.calls }),
    ...(options.effectMs === undefined ? {} : { effectMs: options.effectMs }),
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    ...(options.reconcile === undefined ? {} : { reconcile: options.reconcile }),
    // Give every process time to start and connect before the common start.
    startAt: options.startAt ?? (processes > 1 ? Date.now() + 1500 : undefined),
  } as WorkerScenario;
  return Promise.all(
    Array.from(
      { length: processes },
      () =>
        new Promise<WorkerReport>((resolve, reject) => {
          const child = spawn(process.execPath, [...(options.execArgv ?? []), workerPath], {
            env: {
              ...process.env,
              ...options.env,
              IDEMPOTENT_TOOLS_WORKER: JSON.stringify(scenario),
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let stdout = '';
          let stderr = '';
          child.stdout.on('data', (d) => (stdout += d));
          child.stderr.on('data', (d) => (stderr += d));
          const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 600_000);
          child.on('error', reject);
          child.on('close', (exitCode, signal) => {
            clearTimeout(timer);
            const line = stdout.trim().split('\n').filter(Boolean).at(-1);
            const results =
              line === undefined
                ? []
                : ((JSON.parse(line) as { results: WorkerCallResult[] }).results ?? []);
            resolve({ exitCode, signal, results, stderr });
          });
        }),
    ),
  );
}
