/**
 * The checker's report: a markdown table of every run (a row per store x driver x
 * configuration), the limits' rates, the mutation table, and one example key's history per
 * anomaly; written into bench/RESULTS.md (section "Fault checker") and bench/results/chaos.json.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ANOMALY_KINDS, type KeyHistory, type RunResult } from './analyze.ts';
import { CONFIGS, targetName } from './types.ts';

export const BENCH_DIR = fileURLToPath(new URL('../../bench/', import.meta.url));
const HEADING = '## Fault checker';
const OLD_HEADING = '## Chaos soak';

/** One row of the mutation table. */
export interface MutationRow {
  mutation: string;
  bug: string;
  where: string;
  target: string;
  detected: boolean;
  /** The anomaly kinds the detecting run found. */
  caughtAs: string[];
  runs: number;
  /** Wall time from the first run's start to the detecting run's verdict, s. */
  seconds: number;
  seed?: number;
  shrunk?: string;
  scheduleFile?: string;
  command?: string;
  example?: KeyHistory;
}

export interface ResultsFile {
  updatedAt: string;
  machine: string;
  code: string;
  runs: RunResult[];
  mutations: MutationRow[];
}

export function machine(): string {
  return `${availableParallelism()} cores, ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' / ')}`;
}

const fmt = (n: number) => n.toLocaleString('en-US');
const pct = (n: number, of: number) => (of === 0 ? '0' : `${n} (${((100 * n) / of).toFixed(1)}%)`);

function render(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, c) => (c < 2 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** The table of runs: a row per store x driver x configuration. */
export function table(results: RunResult[]): string {
  const header = [
    'store / driver',
    'configuration',
    'keys',
    'calls',
    'effects',
    'duplicates',
    'wrong replays',
    'lost results',
    'stuck',
    'unapproved',
    'limit: frozen mid-request',
    'limit: outcome-unknown (keys)',
    'verdict',
  ];
  const rows: string[][] = [];
  for (const r of results) {
    for (const config of CONFIGS) {
      const c = r.perConfig[config];
      if (c === undefined) continue;
      const bad = ANOMALY_KINDS.some((k) => c[k] > 0);
      rows.push([
        targetName(r.target),
        config,
        fmt(c.keys),
        fmt(c.calls),
        fmt(c.effects),
        String(c.duplicate),
        String(c['wrong-replay']),
        String(c['lost-result']),
        String(c.stuck),
        String(c.unapproved),
        pct(c.frozenMidRequest, c.keys),
        pct(c.outcomeUnknown, c.keys),
        bad ? '**FAIL**' : 'PASS',
      ]);
    }
  }
  return render(header, rows);
}

/** The faults each run fired, a line per run. */
export function faultLines(results: RunResult[]): string {
  return results
    .map((r) => {
      const fired = Object.entries(r.faults)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]) => `${n} ${k}`)
        .join(', ');
      return `- ${targetName(r.target)} (seed ${r.seed}, ${r.engine}): ${fmt(r.calls)} calls in ${r.loadSeconds} s; faults fired: ${fired || 'none'}${r.skippedFaults ? ` (${r.skippedFaults} skipped: their worker was busy with a targeted freeze, or no other worker was up)` : ''}${r.unexpectedExits ? `; ${r.unexpectedExits} workers died by themselves` : ''}; verdict **${r.verdict}**${r.failures.length ? `: ${r.failures.join('; ')}` : ''}.`;
    })
    .join('\n');
}

export function mutationTable(rows: MutationRow[]): string {
  return render(
    [
      'mutation',
      'planted bug',
      'where',
      'run on',
      'caught',
      'as',
      'runs',
      'time to detect',
      'seed',
      'shrunk schedule',
    ],
    rows.map((m) => [
      m.mutation,
      m.bug.replaceAll('|', '\\|'),
      m.where,
      m.target,
      m.detected ? 'yes' : '**NO**',
      m.caughtAs.join(', ') || '-',
      String(m.runs),
      `${m.seconds.toFixed(0)} s`,
      m.seed === undefined ? '-' : String(m.seed),
      m.shrunk ?? '-',
    ]),
  );
}

export function historyText(h: KeyHistory): string {
  const cap = (lines: string[], n: number) =>
    lines.length > n ? [...lines.slice(0, n), `... ${lines.length - n} more`] : lines;
  return [
    `key ${h.key} (${h.plan}), idempotency key ${h.idemKey}`,
    'vendor log:',
    ...h.vendorLog.map((l) => `  ${l}`),
    'journal (workers and checker):',
    ...cap(h.journal, 40).map((l) => `  ${l}`),
    'faults around it:',
    ...cap(h.chaos, 15).map((l) => `  ${l}`),
    `record before the checker: ${h.recordBeforeChecker}`,
    `record after the checker:  ${h.recordFinal}`,
    `checker: ${h.checker}`,
    `callers were told: ${h.callers.join('; ') || 'nothing'}`,
  ].join('\n');
}

/** Per failed run: its anomalies and one example history per kind. */
export function details(results: RunResult[]): string {
  const out: string[] = [];
  for (const r of results) {
    if (r.verdict === 'PASS') continue;
    out.push(
      `### ${targetName(r.target)}${r.mutation ? ` (mutation ${r.mutation})` : ''}: FAIL (seed ${r.seed})`,
      '',
    );
    out.push(...r.failures.map((f) => `- ${f}`), '');
    for (const a of r.anomalies.slice(0, 8))
      out.push(`- ${a.kind} ${a.key} (${a.config}): ${a.detail}`);
    out.push('');
    for (const kind of ANOMALY_KINDS) {
      const h = r.examples[kind];
      if (h === undefined) continue;
      out.push(`Example, ${kind}:`, '', '```text', historyText(h), '```', '');
    }
  }
  return out.join('\n');
}

export function method(): string {
  return [
    "Written by `pnpm chaos` (chaos/, issue 26): a seeded, randomized fault checker. Per store x driver, one run draws a schedule from its seed: keys under every configuration (the defaults with a plain `fetch`, `idempotentFetch`, `vendorDedupes` with `onStale: 'reexecute'`, `reconcile`, `withLocalCache`, the HTTP handler `idempotentHandler`, approvals), sent to worker processes at set times (10% to 3 workers at once, 20% called again after a \"lost reply\", late retries), a targeted freeze of the holder at each point of the tool for three configurations, and faults at set times: SIGKILL and SIGSTOP of workers, a TCP proxy between each worker and the store that delays, drops or blackholes each direction separately (one worker or all), store outages (the engine SIGSTOPped; SQLite: another process holding the write lock), engine crashes and restarts (Redis and Cluster on their AOF, PostgreSQL immediate shutdown), clock steps both ways (Redis and PostgreSQL: the engine's own clock, by a preload / libfaketime; SQLite, DynamoDB, PGlite: the workers' `Date.now`), and vendors that commit 300 ms after receipt or hold their replies past the tool's timeout. Every effect is a request to a vendor process that logs it; then every worker is continued and drained, a checker calls every key once more, and the history checker holds the vendor logs against what every caller was told and what the store holds.",
    '',
    'Columns: "duplicates" = keys with more than one effect (outside the limit); "wrong replays" = callers told an outcome that is not this key\'s effect, or two outcomes; "lost results" = an effect no caller can get (record missing, failed or another outcome); "stuck" = no outcome and nothing explains it (the final call fails, or a caller was told outcome-unknown while nothing had happened to the key\'s holders); "unapproved" = an effect of a rejected approval. The limits the design names, counted apart: "frozen mid-request" = a holder frozen after its last ownership check and before the vendor got the request, at a vendor that does not dedupe (a second effect); "outcome-unknown" = keys whose final answer is outcome-unknown (or the HTTP handler\'s 500 `request_failed`) where reconcile cannot tell (no reconcile) and a fault explains the stale record. Verdict FAIL = any anomaly column above is not 0.',
  ].join('\n');
}

/** Replace the earlier copy of the section in RESULTS.md (the old "Chaos soak" too). */
export function writeSection(file: string, heading: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Bench results\n';
  for (const h of [heading, OLD_HEADING]) {
    const at = text.indexOf(`\n${h}\n`);
    if (at < 0) continue;
    let next = text.indexOf('\n## ', at + h.length + 1);
    if (next < 0) next = text.length;
    text = text.slice(0, at + 1) + text.slice(next + 1);
  }
  writeFileSync(file, `${text.trimEnd()}\n\n${heading}\n\n${body.trimEnd()}\n`);
}

const strip = (r: RunResult): RunResult => ({ ...r, anomalies: r.anomalies.slice(0, 50) });

/** Write results/chaos.json and the RESULTS.md section. */
export function writeResults(
  file: Omit<ResultsFile, 'updatedAt' | 'machine'>,
  benchDir = BENCH_DIR,
): string {
  const full: ResultsFile = {
    updatedAt: new Date().toISOString(),
    machine: machine(),
    code: file.code,
    runs: file.runs.map(strip),
    mutations: file.mutations,
  };
  mkdirSync(join(benchDir, 'results'), { recursive: true });
  writeFileSync(join(benchDir, 'results', 'chaos.json'), `${JSON.stringify(full, null, 2)}\n`);
  const totals = (key: 'calls' | 'keys') => file.runs.reduce((n, r) => n + r[key], 0);
  const markdown = [
    method(),
    '',
    `Run of ${full.updatedAt.slice(0, 16).replace('T', ' ')} UTC on ${file.code}; machine: ${full.machine} (engines, vendors, workers and the harness share it). ${fmt(totals('keys'))} keys, ${fmt(totals('calls'))} calls in all.`,
    '',
    table(file.runs),
    '',
    'Faults per run:',
    '',
    faultLines(file.runs),
    '',
    '### The mutation table',
    '',
    'Known bugs planted without editing the product (a patched copy of `packages/core/dist` loaded by a module-resolution hook, or a wrapper store), each run with fresh seeds until the checker reports an anomaly. "time to detect" is the wall time from the first run\'s start to the detecting run\'s verdict; the shrunk schedule is the smallest found that still fails, saved under `bench/results/chaos-failures/`.',
    '',
    file.mutations.length === 0 ? '(not run)' : mutationTable(file.mutations),
    '',
    ...file.mutations
      .filter((m) => m.command !== undefined)
      .map((m) => `- ${m.mutation}: \`${m.command}\``),
    '',
    details(file.runs),
  ].join('\n');
  writeSection(join(benchDir, 'RESULTS.md'), HEADING, markdown);
  return markdown;
}
