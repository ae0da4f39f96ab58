/**
 * The soak's report: one markdown table (a row per store), what failed with one example key's
 * history each, written into bench/RESULTS.md (section "Chaos soak") and bench/results/chaos.json.
 * A run of some stores replaces their rows and keeps the others' (each row says when it ran).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KeyHistory, SoakResult } from './analyze.ts';
import { STORE_KINDS, type StoreKind } from './types.ts';

/** The repository's bench/ folder (RESULTS.md, results/). */
export const BENCH_DIR = fileURLToPath(new URL('../../bench/', import.meta.url));
const HEADING = '## Chaos soak';

export interface ResultsFile {
  updatedAt: string;
  machine: string;
  stores: Partial<Record<StoreKind, SoakResult>>;
}

const NAMES: Record<StoreKind, string> = {
  sqlite: 'SQLite',
  redis: 'Redis (AOF always)',
  cluster: 'Redis Cluster (3 masters)',
  postgres: 'PostgreSQL',
};

export function machine(): string {
  return `${availableParallelism()} cores, ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, load average ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' / ')}`;
}

function fmt(n: number): string {
  return n.toLocaleString('en-US');
}

/** The summary table, one row per store. */
export function table(results: SoakResult[]): string {
  const header = [
    'store',
    'code',
    'keys',
    'calls (calls/s)',
    'worker kills',
    'stops: random / targeted',
    'engine restarts',
    'max effects / key',
    'keys > 1 effect',
    'of which: frozen mid-request, plain vendor (known limit)',
    'effect but record missing / other outcome',
    'callers told different outcomes',
    'stuck: explained / unexplained',
    'never ran',
    'saved by vendor dedupe',
    'verdict',
  ];
  const rows = results.map((r) => {
    const i = r.invariants;
    const m = i.recordMismatch;
    return [
      NAMES[r.store],
      r.code ?? '?',
      fmt(r.keys),
      `${fmt(r.calls)} (${fmt(r.callsPerSecond)})`,
      fmt(r.faults.kills),
      `${r.faults.stops} / ${r.faults.targetedFreezes}`,
      r.store === 'sqlite' ? 'n/a' : fmt(r.faults.engineRestarts),
      String(i.maxEffectsPerKey),
      String(i.keysOverOneEffect),
      String(i.duplicates.plain['frozen-mid-request']),
      `${m.missing} / ${m.failed + m.otherOutcome}`,
      String(i.disagreements + i.lostReplyMismatches),
      `${i.stuck.explained} / ${i.stuck.unexplained}`,
      fmt(i.neverRan),
      fmt(i.dedupeSaved),
      `**${r.verdict}**`,
    ];
  });
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((row) => row[c]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`;
  const rule = `| ${widths.map((w, c) => (c === 0 ? '-'.repeat(w) : `${'-'.repeat(w - 1)}:`)).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export function historyText(h: KeyHistory): string {
  const cap = (lines: string[], n: number) =>
    lines.length > n ? [...lines.slice(0, n), `... ${lines.length - n} more`] : lines;
  return [
    `key ${h.key} (${h.plan}), idempotency key ${h.idemKey}${h.cause ? `, cause: ${h.cause}` : ''}`,
    'vendor log:',
    ...h.vendorLog.map((l) => `  ${l}`),
    'journal (workers and checker):',
    ...cap(h.journal, 40).map((l) => `  ${l}`),
    'chaos:',
    ...cap(h.chaos, 15).map((l) => `  ${l}`),
    `record before the checker: ${h.recordBeforeChecker}`,
    `record after the checker:  ${h.recordFinal}`,
    `checker: ${h.checker}`,
    `callers were told: ${h.callers.join('; ') || 'nothing'}`,
  ].join('\n');
}

const KNOWN_LIMIT = 'duplicate effect (plain vendor, frozen-mid-request)';

/**
 * What failed per store, with one example key's history per failed invariant (and, with
 * `knownLimit`, one of the known limit: a holder frozen mid-request at the plain vendor).
 */
export function details(results: SoakResult[], { knownLimit = true } = {}): string {
  const out: string[] = [];
  for (const r of results) {
    const f = r.faults;
    const fired = Object.entries(f.targetedFired)
      .map(([name, n]) => `${name} ${n}`)
      .join(', ');
    const outcomes = Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${fmt(n)}`)
      .join(', ');
    const checker = Object.entries(r.checkerOutcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${fmt(n)}`)
      .join(', ');
    const i = r.invariants;
    const dup = (['plain', 'dedupe'] as const)
      .map(
        (v) =>
          `${v}: ${Object.entries(i.duplicates[v])
            .map(([cause, n]) => `${cause} ${n}`)
            .join(', ')}`,
      )
      .join('; ');
    out.push(
      `### ${NAMES[r.store]}: ${r.verdict}`,
      '',
      `Run ${r.finishedAt} on ${r.code ?? 'unknown code'}; ${r.engine}. Load ${r.loadSeconds} s; ${fmt(r.keys)} keys, ${fmt(r.calls)} calls (${outcomes}). Faults: ${f.kills} worker SIGKILLs (${f.crashedCalls} calls in flight died with them, resumed elsewhere), ${f.stops} random SIGSTOPs past the lease, ${f.targetedFreezes} targeted freezes (${fired || 'none completed'}), ${r.store === 'sqlite' ? 'no engine to restart' : `${f.engineRestarts} engine crashes + restarts (down ${f.engineDownMs.mean} ms on average, ${f.engineDownMs.max} ms at most)`}; ${f.successors} successor calls sent while a holder was frozen, ${f.retries} retries of failed calls, ${f.lateRetries} late retries of settled keys; ${f.unexpectedExits} workers died by themselves, ${f.settleKills} killed at the drain timeout. Checker: ${checker}.`,
      '',
      `Effects: plain vendor ${fmt(i.plainEffects)}, dedupe vendor ${fmt(i.dedupeEffects)} (from ${fmt(i.dedupeRawRequests)} raw requests; its dedupe saved ${fmt(i.dedupeSaved)} keys). Keys with > 1 effect by cause: ${dup}.${
        Object.keys(i.stuck.reasons).length > 0
          ? ` Stuck: ${Object.entries(i.stuck.reasons)
              .map(([why, n]) => `${n} ${why}`)
              .join('; ')}.`
          : ''
      } Never ran before the checker: ${fmt(i.neverRan)} (${fmt(i.ranByChecker)} of them then ran once, by the checker). Records still in progress when the workers stopped, left to the checker's retry: ${fmt(i.inProgressAtSettle ?? 0)}.`,
      '',
    );
    if (r.failures.length > 0) {
      out.push('Failed:', '', ...r.failures.map((f) => `- ${f}`), '');
    }
    for (const [name, h] of Object.entries(r.examples)) {
      if (name === KNOWN_LIMIT) {
        if (!knownLimit) continue;
        out.push('The known limit, an example (not a failure):');
      } else {
        out.push(`Example, ${name}:`);
      }
      out.push('', '```text', historyText(h), '```', '');
    }
  }
  return out.join('\n');
}

export function method(): string {
  return [
    "Written by `pnpm chaos` (chaos/, issue 16). Per store: worker processes run the keys through `createIdempotency` against the engine the harness started itself; every effect is a request to one of two vendor processes on 127.0.0.1 that log every request to a file before answering: a **plain** vendor without idempotency (the tool reconciles a stale call by asking it whether key K happened; a lookup that fails leaves the call outcome-unknown) and a **dedupe** vendor that honours `Idempotency-Key` like Stripe (the tool sends it with `idempotentFetch`, `onStale: 'reexecute'`, `vendorDedupes: true`) and counts raw requests. Right before its request the tool checks `ctx.signal` and `ctx.stillOwned?.()` and does not call the vendor when the attempt no longer owns the call.",
    '',
    'Load: half the keys per vendor; 10% sent to 3 workers at once, 20% called again after a "lost reply", late retries of settled keys, failed calls retried with backoff, calls of killed workers resumed elsewhere. Chaos: SIGKILL of random workers (restarted), SIGSTOP of random workers for 1.5-3 leases (their calls retried elsewhere meanwhile), targeted freezes (a worker stops itself before its ownership check, on the wire after every check and before the vendor got the request, or after the vendor replied; a successor settles the key, then it is continued), engine crashes (Redis kill -9 on the same AOF, a Cluster master kill -9 and back, PostgreSQL immediate shutdown and start; SQLite: workers killed 3x as often), vendor replies held past the tool\'s timeout, vendor lookups answering 503. Settle: every worker continued and drained, a checker retries every key once more (reliable vendor), then the vendor logs are held against the store.',
    '',
    'Columns: "keys > 1 effect" counts every key the vendors saw more than one effect for; "frozen mid-request" is the limit no ownership check closes (a holder frozen after its check, before the vendor received the request): counted, not a failure, and only the plain vendor can show it. "effect but record missing / other outcome": the vendor did it, the store does not hold that outcome. "stuck": no outcome after the checker (explained = outcome-unknown because reconcile could not tell). "never ran": no effect and no record before the checker (the checker then ran them once). Verdict FAIL = any must-be-0 column above is not 0 (or a worker died by itself). calls/s is what this paced, fault-ridden load achieved, not a throughput figure.',
  ].join('\n');
}

/** Replace the earlier copy of the section in RESULTS.md (or add it at the end). */
export function writeSection(file: string, heading: string, body: string): void {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Bench results\n';
  const at = text.indexOf(`\n${heading}\n`);
  if (at >= 0) {
    const next = text.indexOf('\n## ', at + heading.length + 1);
    text = text.slice(0, at + 1) + (next >= 0 ? text.slice(next + 1) : '');
  }
  writeFileSync(file, `${text.trimEnd()}\n\n${heading}\n\n${body.trimEnd()}\n`);
}

/**
 * Merge `results` into chaos.json and rewrite the RESULTS.md section from it (no results: render
 * the section again from chaos.json as it is).
 */
export function writeResults(
  results: SoakResult[],
  benchDir = BENCH_DIR,
): { markdown: string; all: SoakResult[] } {
  const mdFile = join(benchDir, 'RESULTS.md');
  const jsonFile = join(benchDir, 'results', 'chaos.json');
  let file: ResultsFile = { updatedAt: '', machine: '', stores: {} };
  if (existsSync(jsonFile)) {
    try {
      file = JSON.parse(readFileSync(jsonFile, 'utf8')) as ResultsFile;
    } catch {
      // a broken file is replaced
    }
  }
  for (const r of results) {
    file.stores[r.store] = {
      ...r,
      targeted: r.targeted.map(({ history: _history, ...t }) => t),
    };
  }
  if (results.length > 0) {
    file.updatedAt = new Date().toISOString();
    file.machine = machine();
  }
  mkdirSync(join(benchDir, 'results'), { recursive: true });
  writeFileSync(jsonFile, `${JSON.stringify(file, null, 2)}\n`);
  const all = STORE_KINDS.map((kind) => file.stores[kind]).filter(
    (r): r is SoakResult => r !== undefined,
  );
  const markdown = [
    method(),
    '',
    `Machine: ${file.machine}. Engines, vendors, workers and the harness share it.`,
    '',
    table(all),
    '',
    "Each store below: what ran and what the vendors saw; for a failed invariant, one key's whole story (the vendor's log, every worker's journal lines for the key, the faults around it, the record before and after the checker). The known limit's examples are in results/chaos.json.",
    '',
    details(all, { knownLimit: false }),
  ].join('\n');
  writeSection(mdFile, HEADING, markdown);
  return { markdown, all };
}
