import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DriverCaseOptions, driverCases } from './fixture-tests.js';
import { countEffects } from './processes.js';

/** How a child process ended: the signal that killed it (a crash is `SIGKILL`), its output. */
export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved as they came: the message of a failed expectation. */
  out: string;
}

/**
 * Run a TypeScript module in a child Node process (`node --import tsx <module>`, from `cwd`),
 * with `env` added to this process's. One harness for every adapter's crash tests: the module
 * runs the framework's real loop and kills itself (`process.kill(process.pid, 'SIGKILL')`) at the
 * crash point it is told. Resolves on `close`, when the child has exited and both streams have
 * ended, so the output is complete however loaded the machine is; no time limit of its own (the
 * test runner's hang detector is the only one).
 */
export function runChild(
  module: string,
  options: { cwd: string; env?: Record<string, string> },
): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', module], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let out = '';
    child.stdout.on('data', (chunk) => {
      stdout += String(chunk);
      out += String(chunk);
    });
    child.stderr.on('data', (chunk) => {
      stderr += String(chunk);
      out += String(chunk);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, out }));
  });
}

/** The last line of a child's output parsed as JSON: what the child printed as its result. */
export function lastJsonLine<T = Record<string, unknown>>(output: string): T {
  const line = output.trim().split('\n').at(-1);
  try {
    return JSON.parse(line ?? '') as T;
  } catch {
    throw new Error(`the child printed no JSON result:\n${output}`);
  }
}

/** Where a crash case kills the process: after the outcome was stored, or right after the effect. */
export type CrashPoint = 'after-persist' | 'after-effect';

/** The files of one crash case: the SQLite store and the vendor's effect log, in a fresh folder. */
export interface CrashFiles {
  dbPath: string;
  effectsFile: string;
}

/** The files of the crash case `name` in `dir` (a folder the test removes afterwards). */
export function crashFiles(dir: string, name: string): CrashFiles {
  return { dbPath: join(dir, `${name}.db`), effectsFile: join(dir, `${name}.effects`) };
}

/** What the resumed run of the same turn (a new process) says about the tool's call. */
export type ResumedOutcome =
  | { replayed: true; value?: unknown }
  | { outcomeUnknown: true }
  | { reconciled: true; value?: unknown };

/** What a framework adapter gives the crash cases. */
export interface CrashDriver {
  /**
   * Run the turn in a child process that kills itself at `at` (the shared `runChild`): the
   * effect is appended to `files.effectsFile`, the store is the SQLite file `files.dbPath`.
   */
  crash(at: CrashPoint, files: CrashFiles): Promise<ChildResult>;
  /**
   * The same turn resumed in this process, as the framework resumes it (the same thread, the
   * same history, the checkpoint), on the same store; `reconcile`: the tool's policy looks the
   * effect up in `files.effectsFile`. What the tool call came back with.
   */
  resume(files: CrashFiles, options: { reconcile: boolean }): Promise<ResumedOutcome>;
  close?(): Promise<void>;
}

export interface CrashCaseOptions extends DriverCaseOptions<CrashDriver> {
  /** Whether the driver's `resume` supports `reconcile: true`. @default true */
  reconcile?: boolean;
}

/**
 * A process killed mid-turn, on a SQLite store, resumed by the framework in another process:
 * 1. killed after the outcome was stored: the resumed run replays it, one effect;
 * 2. killed right after the effect: the resumed run is told outcome-unknown, one effect;
 * 3. the same with `reconcile`: the effect is found and adopted, one effect.
 */
export function runCrashCases(options: CrashCaseOptions): void {
  const { describe, expect } = options;
  const define = driverCases(options);
  const files = (): CrashFiles => {
    const dir = mkdtempSync(join(tmpdir(), 'idempotent-crash-'));
    return { dbPath: join(dir, 'agent.db'), effectsFile: join(dir, 'effects.log') };
  };
  const crashed = async (driver: CrashDriver, at: CrashPoint) => {
    const f = files();
    const child = await driver.crash(at, f);
    expect(child.signal).toBe('SIGKILL');
    expect(countEffects(f.effectsFile)).toBe(1);
    return f;
  };

  describe(`${options.name}: a process killed mid-turn (SQLite, another process resumes)`, () => {
    define('killed after the outcome was stored: the resumed run replays it', async (driver) => {
      const f = await crashed(driver, 'after-persist');
      expect(await driver.resume(f, { reconcile: false })).toMatchObject({ replayed: true });
      expect(countEffects(f.effectsFile)).toBe(1);
    });
    define(
      'killed right after the effect: outcome-unknown, never a second effect',
      async (driver) => {
        const f = await crashed(driver, 'after-effect');
        expect(await driver.resume(f, { reconcile: false })).toEqual({ outcomeUnknown: true });
        expect(countEffects(f.effectsFile)).toBe(1);
      },
    );
    if (options.reconcile !== false) {
      define(
        'killed right after the effect, with reconcile: the effect is found and adopted',
        async (driver) => {
          const f = await crashed(driver, 'after-effect');
          expect(await driver.resume(f, { reconcile: true })).toMatchObject({ reconciled: true });
          expect(countEffects(f.effectsFile)).toBe(1);
        },
      );
    }
  });
}
