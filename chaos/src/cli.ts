/**
 * `pnpm chaos` (the long form): every store x driver, every configuration, then the mutation
 * table; writes bench/RESULTS.md (section "Fault checker") and bench/results/chaos.json.
 *
 *   pnpm chaos -- --targets sqlite/node:sqlite,redis/ioredis --seed 7 --workers 4 --keys 400
 *   pnpm chaos -- --schedule bench/results/chaos-failures/<file>.json   # re-run a schedule
 *   pnpm chaos -- --mutation live-as-stale --targets redis/ioredis       # one mutated run
 *
 * A failure prints the seed, shrinks the schedule (fewer keys, faults, workers) and prints the
 * command that runs the shrunk schedule again. Exit code 1 when a run on the product failed.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunResult } from './analyze.ts';
import { engineMissing, startEngine } from './engines.ts';
import { MUTATIONS, mutationNamed } from './mutations.ts';
import {
  BENCH_DIR,
  details,
  faultLines,
  type MutationRow,
  mutationTable,
  table,
  writeResults,
} from './report.ts';
import { RUN_DEFAULTS, type RunOptions, runSchedule } from './run.ts';
import {
  describeSchedule,
  generateSchedule,
  loadSchedule,
  type ScheduleOptions,
  saveSchedule,
} from './schedule.ts';
import { shrink } from './shrink.ts';
import {
  CONFIGS,
  type ConfigName,
  type MutationName,
  parseTarget,
  type Schedule,
  TARGETS,
  type Target,
  targetName,
} from './types.ts';

const USAGE = `pnpm chaos -- [--targets ${TARGETS.map(targetName).join(',')}]
  [--seed N] [--workers 4] [--keys 300] [--seconds 20] [--configs ${CONFIGS.join(',')}]
  [--schedule file.json (run a saved schedule)] [--mutation NAME | --mutations-only | --no-mutations]
  [--no-shrink] [--keep] [--no-write] [--bench-dir dir]
mutations: ${MUTATIONS.map((m) => m.name).join(', ')}`;

function usage(message: string): never {
  console.error(`${message}\n\nUsage:\n${USAGE}`);
  process.exit(2);
}

interface Args {
  targets: Target[];
  seed: number;
  workers: number;
  keys: number;
  seconds: number;
  configs: ConfigName[];
  schedule?: string;
  mutation?: MutationName;
  mutations: 'with' | 'only' | 'none';
  shrink: boolean;
  keep: boolean;
  write: boolean;
  benchDir: string;
}

function parse(argv: string[]): Args {
  const a: Args = {
    targets: [...TARGETS],
    seed: Number(process.env.CHAOS_SEED ?? 26),
    workers: 4,
    keys: 300,
    seconds: 20,
    configs: [...CONFIGS],
    mutations: 'with',
    shrink: true,
    keep: false,
    write: true,
    benchDir: BENCH_DIR,
  };
  const args = argv.filter((x) => x !== '--');
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq < 0 ? undefined : eq) : '';
    const value = () => {
      if (eq >= 0) return arg.slice(eq + 1);
      const next = args[++i];
      if (next === undefined) usage(`--${name} needs a value.`);
      return next;
    };
    const whole = (min: number) => {
      const text = value();
      const n = Number(text);
      if (!Number.isInteger(n) || n < min)
        usage(`--${name} must be a whole number >= ${min}, got ${text}.`);
      return n;
    };
    if (name === 'help' || arg === '-h') usage('The fault checker (issue 26).');
    else if (name === 'targets' || name === 'stores') {
      a.targets = value()
        .split(',')
        .filter(Boolean)
        .flatMap((t) => {
          const matches = TARGETS.filter((x) => targetName(x) === t || x.store === t);
          if (matches.length === 0) usage(`--targets: unknown target ${t}.`);
          return matches;
        });
    } else if (name === 'seed') a.seed = whole(0);
    else if (name === 'workers') a.workers = whole(2);
    else if (name === 'keys') a.keys = whole(1);
    else if (name === 'seconds') a.seconds = whole(1);
    else if (name === 'configs') {
      const list = value().split(',').filter(Boolean);
      const bad = list.filter((c) => !CONFIGS.includes(c as ConfigName));
      if (bad.length > 0) usage(`--configs: unknown ${bad.join(', ')}.`);
      a.configs = list as ConfigName[];
    } else if (name === 'schedule') a.schedule = value();
    else if (name === 'mutation') {
      const m = value();
      if (mutationNamed(m) === undefined) usage(`--mutation: unknown ${m}.`);
      a.mutation = m as MutationName;
    } else if (name === 'mutations-only') a.mutations = 'only';
    else if (name === 'no-mutations') a.mutations = 'none';
    else if (name === 'no-shrink') a.shrink = false;
    else if (name === 'keep') a.keep = true;
    else if (name === 'no-write') a.write = false;
    else if (name === 'bench-dir') a.benchDir = value();
    else usage(`Unknown argument ${arg}.`);
  }
  return a;
}

/** Which code runs: `CHAOS_CODE`, else the commit (+ "with uncommitted core changes"). */
function codeLabel(): string {
  if (process.env.CHAOS_CODE !== undefined) return process.env.CHAOS_CODE;
  try {
    const core = fileURLToPath(new URL('../../packages/core/src', import.meta.url));
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', core, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    const commit = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--', '.') !== ''
      ? `${commit} + uncommitted core changes`
      : commit;
  } catch {
    return 'unknown';
  }
}

/** The schedule of `seed` for `target` (the engine says which faults it takes). */
export async function scheduleFor(
  target: Target,
  o: Pick<Args, 'seed' | 'workers' | 'keys' | 'seconds' | 'configs'> & { mutation?: MutationName },
): Promise<Schedule> {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  // The fault kinds and the clock are the engine's: read from a descriptor, nothing started
  // that lasts (SQLite and PGlite start nothing; the others are started and stopped).
  const dir = mkdtempSync(join(tmpdir(), 'idt-chaos-probe-'));
  const engine = await startEngine(target, dir, { downMs: 0 });
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
  const options: ScheduleOptions = {
    seed: o.seed,
    target,
    workers: engine.singleProcess ? 1 : o.workers,
    keys: o.keys,
    loadMs: o.seconds * 1000,
    lease: RUN_DEFAULTS.lease,
    fetchTimeoutMs: RUN_DEFAULTS.fetchTimeoutMs,
    configs: o.configs,
    faults: engine.faults,
    clock: engine.clock,
    every: {},
    concurrentShare: 0.1,
    lostReplyShare: 0.2,
    lateShare: 0.3,
    freezeConfigs: engine.singleProcess
      ? []
      : (['fetch', 'reconcile', 'vendorDedupes'] as const).filter((c) => o.configs.includes(c)),
    ...(o.mutation === undefined ? {} : { mutation: o.mutation }),
  };
  return generateSchedule(options);
}

const repro = (file: string) =>
  `pnpm chaos -- --schedule ${relative(process.cwd(), file)} --no-write`;

/** Shrink a failure, save the shrunk schedule, print what reproduces it. */
async function reportFailure(
  schedule: Schedule,
  result: RunResult,
  a: Args,
  options: Partial<RunOptions>,
  maxRuns: number,
): Promise<{ file: string; summary: string; command: string }> {
  const dir = join(a.benchDir, 'results', 'chaos-failures');
  mkdirSync(dir, { recursive: true });
  const base = `${schedule.target.store}-${schedule.target.driver.replace(/[^a-z0-9]+/gi, '')}-${schedule.mutation ?? 'main'}-seed${schedule.seed}`;
  let shrunk = schedule;
  if (a.shrink) {
    console.log(`   shrinking (at most ${maxRuns} runs)...`);
    const s = await shrink(schedule, result, {
      ...options,
      maxRuns,
      tries: 2,
      log: (l) => console.log(`   ${l}`),
    });
    shrunk = s.schedule;
  }
  const file = join(dir, `${base}.json`);
  saveSchedule(file, shrunk);
  const summary = describeSchedule(shrunk);
  const command = repro(file);
  console.log(
    `   FAILED: seed ${schedule.seed} on ${targetName(schedule.target)}${schedule.mutation ? ` (mutation ${schedule.mutation})` : ''}`,
  );
  console.log(`   shrunk schedule: ${summary}`);
  console.log(`   re-run: ${command}`);
  return { file, summary, command };
}

async function main(): Promise<void> {
  const a = parse(process.argv.slice(2));
  const code = codeLabel();
  const log = (line: string) => console.log(`   ${line}`);
  const runOptions: Partial<RunOptions> = { keep: a.keep, log };

  if (a.schedule !== undefined) {
    const schedule = loadSchedule(a.schedule);
    console.log(
      `== schedule ${a.schedule}: ${targetName(schedule.target)}, seed ${schedule.seed}${schedule.mutation ? `, mutation ${schedule.mutation}` : ''}; ${describeSchedule(schedule)}`,
    );
    const result = await runSchedule({ ...runOptions, schedule });
    result.code = code;
    console.log(`\n${table([result])}\n\n${faultLines([result])}\n\n${details([result])}`);
    process.exit(result.verdict === 'PASS' ? 0 : 1);
  }

  const runs: RunResult[] = [];
  if (a.mutations !== 'only') {
    for (const target of a.targets) {
      const missing = await engineMissing(target);
      if (missing !== undefined) {
        console.log(`\n== ${targetName(target)}: skipped (${missing})`);
        continue;
      }
      const schedule = await scheduleFor(target, {
        ...a,
        ...(a.mutation ? { mutation: a.mutation } : {}),
      });
      console.log(
        `\n== ${targetName(target)}: seed ${a.seed}${a.mutation ? `, mutation ${a.mutation}` : ''}; ${describeSchedule(schedule)}`,
      );
      const started = Date.now();
      const result = await runSchedule({ ...runOptions, schedule });
      result.code = code;
      result.schedule = describeSchedule(schedule);
      runs.push(result);
      console.log(
        `   ${targetName(target)}: ${result.verdict} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      if (result.verdict === 'FAIL') {
        console.log(details([result]));
        await reportFailure(schedule, result, a, runOptions, 6);
      }
    }
    if (runs.length > 0) console.log(`\n${table(runs)}\n\n${faultLines(runs)}\n`);
  }

  const rows: MutationRow[] = [];
  if (a.mutations !== 'none' && a.mutation === undefined) {
    const target = a.targets.find((t) => t.store === 'sqlite') ?? a.targets[0] ?? TARGETS[0]!;
    for (const m of MUTATIONS) {
      console.log(`\n== mutation ${m.name} on ${targetName(target)}: ${m.bug}`);
      const started = Date.now();
      let row: MutationRow = {
        mutation: m.name,
        bug: m.bug,
        where: m.where,
        target: targetName(target),
        detected: false,
        caughtAs: [],
        runs: 0,
        seconds: 0,
      };
      for (let i = 0; i < 6 && !row.detected; i++) {
        const seed = a.seed * 100 + i;
        const schedule = await scheduleFor(target, {
          seed,
          workers: 4,
          keys: 150,
          seconds: 12,
          configs: a.configs,
          mutation: m.name,
        });
        const result = await runSchedule({ ...runOptions, schedule });
        row.runs++;
        row.seconds = (Date.now() - started) / 1000;
        console.log(
          `   run ${row.runs} (seed ${seed}): ${result.verdict} ${result.failures.join('; ')}`,
        );
        if (result.verdict === 'FAIL') {
          row = {
            ...row,
            detected: true,
            caughtAs: [...new Set(result.anomalies.map((x) => x.kind))],
            seed,
            ...(result.anomalies[0] === undefined
              ? {}
              : { example: result.examples[result.anomalies[0].kind]! }),
          };
          const failure = await reportFailure(schedule, result, a, runOptions, 5);
          row.shrunk = failure.summary;
          row.scheduleFile = relative(a.benchDir, failure.file);
          row.command = failure.command;
        }
      }
      rows.push(row);
    }
    console.log(`\n${mutationTable(rows)}\n`);
  }

  if (a.write && (runs.length > 0 || rows.length > 0) && a.mutation === undefined) {
    writeResults({ code, runs, mutations: rows }, a.benchDir);
    console.log(`Written: ${a.benchDir} RESULTS.md (## Fault checker), results/chaos.json`);
  }
  const productFailed = runs.some((r) => r.verdict === 'FAIL') && a.mutation === undefined;
  const mutationMissed = rows.some((r) => !r.detected);
  process.exit(productFailed || mutationMissed ? 1 : 0);
}

// Interrupted: exit through 'exit', where the engines started here are killed.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main();
}

export { parseTarget };
