/**
 * `pnpm chaos -- --stores sqlite,redis --workers 8 --keys 5000 --seconds 60`
 *
 * Runs the soak on each store in turn, prints the summary table, writes it into bench/RESULTS.md
 * (section "Chaos soak") and bench/results/chaos.json (unless --no-write). Exit code 1 when a
 * store failed an invariant.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SoakResult } from './analyze.ts';
import { details, table, writeResults } from './report.ts';
import { DEFAULT_OPTIONS, runSoak, type SoakOptions } from './soak.ts';
import { STORE_KINDS, type StoreKind } from './types.ts';

/** Numeric flags: name -> option. */
const NUMBERS: Record<string, keyof SoakOptions> = {
  workers: 'workers',
  keys: 'keys',
  seconds: 'seconds',
  'in-flight': 'inFlight',
  rate: 'rate',
  lease: 'lease',
  'wait-timeout': 'waitTimeout',
  'kill-every': 'killEveryMs',
  'stop-every': 'stopEveryMs',
  'restart-every': 'restartEveryMs',
  'down-ms': 'downMs',
  'concurrent-share': 'concurrentShare',
  'lost-reply-share': 'lostReplyShare',
  'late-share': 'lateShare',
  'targeted-share': 'targetedShare',
  'slow-reply-rate': 'slowReplyRate',
  'lookup-fail-rate': 'lookupFailRate',
  seed: 'seed',
};

const USAGE = `pnpm chaos -- [--stores ${STORE_KINDS.join(',')}] [--workers ${DEFAULT_OPTIONS.workers}] [--keys ${DEFAULT_OPTIONS.keys}] [--seconds ${DEFAULT_OPTIONS.seconds}]
  [--in-flight N] [--rate keys/s (0: unpaced)] [--lease ms] [--wait-timeout ms]
  [--kill-every ms] [--stop-every ms] [--restart-every ms] [--down-ms ms]
  [--concurrent-share 0-1] [--lost-reply-share 0-1] [--late-share 0-1] [--targeted-share 0-1]
  [--slow-reply-rate 0-1] [--lookup-fail-rate 0-1] [--seed N] [--keep] [--no-write]
  [--bench-dir dir (where RESULTS.md and results/ are; default: the repository's bench/)]
  [--render (no run: write the RESULTS.md section again from results/chaos.json)]`;

function usage(message: string): never {
  console.error(`${message}\n\nUsage:\n${USAGE}`);
  process.exit(2);
}

function parse(argv: string[]): {
  stores: StoreKind[];
  options: Partial<SoakOptions>;
  write: boolean;
  benchDir: string | undefined;
  render: boolean;
} {
  let stores: StoreKind[] = [...STORE_KINDS];
  const options: Partial<SoakOptions> = {};
  let write = true;
  let benchDir: string | undefined;
  let render = false;
  const args = argv.filter((a) => a !== '--');
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
    if (name === 'help' || arg === '-h') usage('The chaos soak (issue 16).');
    else if (name === 'keep') options.keep = true;
    else if (name === 'no-write') write = false;
    else if (name === 'bench-dir') benchDir = value();
    else if (name === 'render') render = true;
    else if (name === 'stores') {
      const list = value()
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const bad = list.filter((s) => !STORE_KINDS.includes(s as StoreKind));
      if (bad.length > 0 || list.length === 0) {
        usage(
          `--stores: unknown store ${bad.join(', ') || '(none)'}; the stores are ${STORE_KINDS.join(', ')}.`,
        );
      }
      stores = list as StoreKind[];
    } else if (name in NUMBERS) {
      const text = value();
      const n = Number(text);
      if (!Number.isFinite(n) || n < 0) usage(`--${name} must be a number >= 0, got ${text}.`);
      const key = NUMBERS[name]!;
      if (
        ['workers', 'keys', 'seconds', 'inFlight'].includes(key) &&
        (n < 1 || !Number.isInteger(n))
      ) {
        usage(`--${name} must be a whole number >= 1, got ${text}.`);
      }
      if (key.endsWith('Share') || key.endsWith('Rate')) {
        if (key !== 'rate' && n > 1) usage(`--${name} is a share between 0 and 1, got ${text}.`);
      }
      (options as Record<string, number>)[key] = n;
    } else {
      usage(`Unknown argument ${arg}.`);
    }
  }
  if (options.workers !== undefined && options.workers < 2) {
    usage('--workers must be at least 2 (a frozen holder needs a successor in another process).');
  }
  return { stores, options, write, benchDir, render };
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
    const dirty = git('status', '--porcelain', '--', '.') !== '';
    return dirty ? `${commit} + uncommitted core changes` : commit;
  } catch {
    return 'unknown';
  }
}

// Interrupted: exit through 'exit', where the engines started here are killed.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

const { stores, options, write, benchDir, render } = parse(process.argv.slice(2));
if (render) {
  const { all } = writeResults([], benchDir);
  console.log(`${table(all)}\n\nWritten: ${benchDir ?? 'bench/'} RESULTS.md (## Chaos soak)`);
  process.exit(0);
}
const code = codeLabel();
const results: SoakResult[] = [];
for (const store of stores) {
  const started = Date.now();
  console.log(`\n== chaos soak: ${store}`);
  const result = await runSoak({ ...options, store, log: (line) => console.log(line) });
  result.code = code;
  results.push(result);
  console.log(`   ${store}: ${result.verdict} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
console.log(`\n${table(results)}\n`);
console.log(details(results));
if (write) {
  writeResults(results, benchDir);
  console.log(`Written: ${benchDir ?? 'bench/'} RESULTS.md (## Chaos soak), results/chaos.json`);
}
process.exit(results.every((r) => r.verdict === 'PASS') ? 0 : 1);
