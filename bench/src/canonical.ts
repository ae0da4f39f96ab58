/**
 * Canonical JSON (RFC 8785) + SHA-256 vs JSON.stringify + SHA-256, side by side in one process.
 *
 * Every contender hashes with the same function (core's `sha256`), so the ratio isolates the cost
 * of canonicalization. Contenders run interleaved in rounds (alternating order); each round times
 * a fixed number of calls. We report the median ns/op over the rounds and, as the ratio, the
 * median of the per-round ratios to the baseline (robust against a noisy machine).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { canonicalize, sha256 } from '@idempotent-tools/core';
import canonicalizeNpm from 'canonicalize';
import { allowlist, concat, naive } from './alternatives.ts';
import { ORDER, parsed } from './payloads.ts';

interface Contender {
  readonly id: string;
  readonly label: string;
  /** The canonical text (checked against core before timing); absent for the baseline. */
  readonly text?: (value: unknown) => string;
  readonly run: (value: unknown) => string;
}

interface Payload {
  readonly id: string;
  readonly label: string;
  readonly values: readonly unknown[];
  readonly iterations: number;
}

export interface ContenderResult {
  id: string;
  label: string;
  nsPerOp: number;
  minNsPerOp: number;
  ratio: number;
}

export interface PayloadResult {
  id: string;
  label: string;
  bytes: number;
  keys: number;
  results: ContenderResult[];
}

const ROUNDS = 15;

const npmVersion = (
  JSON.parse(
    readFileSync(new URL('../package.json', import.meta.resolve('canonicalize')), 'utf8'),
  ) as { version: string }
).version;

function npm(value: unknown): string {
  const text = canonicalizeNpm(value);
  if (text === undefined) throw new TypeError('not JSON');
  return text;
}

const contenders: readonly Contender[] = [
  {
    id: 'baseline',
    label: 'JSON.stringify + SHA-256 (baseline)',
    run: (value) => sha256(JSON.stringify(value)),
  },
  {
    id: 'core',
    label: '@idempotent-tools/core canonicalize + SHA-256',
    text: canonicalize,
    run: (value) => sha256(canonicalize(value)),
  },
  {
    id: 'npm',
    label: `canonicalize@${npmVersion} (npm) + SHA-256`,
    text: npm,
    run: (value) => sha256(npm(value)),
  },
  {
    id: 'naive',
    label: 'alt: naive recursive sort + join',
    text: naive,
    run: (value) => sha256(naive(value)),
  },
  {
    id: 'concat',
    label: 'alt: tuned recursive string concat',
    text: concat,
    run: (value) => sha256(concat(value)),
  },
  {
    id: 'allowlist',
    label: 'alt: allowlist JSON.stringify(v, keys)',
    text: allowlist,
    run: (value) => sha256(allowlist(value)),
  },
];

// Realistic tool arguments (`payloads.ts`), parsed from JSON like the arguments of a model's
// tool call. Keys are in the order a schema (not the alphabet) puts them.
const order = ORDER;

const email = {
  to: 'alice@example.com',
  subject: 'Réunion demain',
  priority: 2,
  draft: false,
  cc: ['bob@example.com'],
};

function batch(): unknown {
  const orders = [];
  for (let i = 0; i < 10; i++) {
    const copy = structuredClone(order);
    copy.orderId = `ord_${i}_${copy.orderId}`;
    copy.items[0]!.quantity = i + 1;
    orders.push(copy);
  }
  return parsed({ batchId: 'batch_77', orders, dryRun: false });
}

/** The 1 KB order with every key renamed per variant: 1000 key sets, nothing cached. */
function renamedOrders(count: number): unknown[] {
  const rename = (value: unknown, suffix: string): unknown => {
    if (Array.isArray(value)) return value.map((item) => rename(item, suffix));
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k + suffix, rename(v, suffix)]),
    );
  };
  return Array.from({ length: count }, (_, i) => parsed(rename(order, `_${i.toString(36)}`)));
}

const payloads: readonly Payload[] = [
  { id: '1kb', label: '~1 KB tool args', values: [parsed(order)], iterations: 4000 },
  { id: '100b', label: '~100 B tool args', values: [parsed(email)], iterations: 40000 },
  { id: '10kb', label: '~10 KB tool args', values: [batch()], iterations: 400 },
  {
    id: '1kb-cold',
    label: '~1 KB, 1000 key sets',
    values: renamedOrders(1000),
    iterations: 4000,
  },
];

function countKeys(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + countKeys(item), 0);
  if (typeof value !== 'object' || value === null) return 0;
  return Object.values(value).reduce(
    (sum: number, item) => sum + countKeys(item),
    Object.keys(value).length,
  );
}

let sink = 0;

function time(run: (value: unknown) => string, values: readonly unknown[], n: number): number {
  const count = values.length;
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) sink ^= run(values[i % count]).length;
  return Number(process.hrtime.bigint() - start) / n;
}

function median(numbers: readonly number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function check(payload: Payload): void {
  for (const contender of contenders) {
    if (contender.text === undefined) continue;
    for (const value of payload.values.slice(0, 5)) {
      if (contender.text(value) !== canonicalize(value)) {
        throw new Error(`${contender.id} disagrees with core on ${payload.id}`);
      }
    }
  }
}

function measure(payload: Payload): PayloadResult {
  check(payload);
  const { values, iterations } = payload;
  for (const contender of contenders) time(contender.run, values, iterations * 2);
  const samples = new Map<string, number[]>(contenders.map((c) => [c.id, []]));
  const ratios = new Map<string, number[]>(contenders.map((c) => [c.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const ordered = round % 2 === 0 ? contenders : [...contenders].reverse();
    const times = new Map<string, number>();
    for (const contender of ordered)
      times.set(contender.id, time(contender.run, values, iterations));
    const baseline = times.get('baseline')!;
    for (const [id, ns] of times) {
      samples.get(id)!.push(ns);
      ratios.get(id)!.push(ns / baseline);
    }
  }
  return {
    id: payload.id,
    label: payload.label,
    bytes: Buffer.byteLength(JSON.stringify(values[0])),
    keys: countKeys(values[0]),
    results: contenders.map((c) => ({
      id: c.id,
      label: c.label,
      nsPerOp: Math.round(median(samples.get(c.id)!)),
      minNsPerOp: Math.round(Math.min(...samples.get(c.id)!)),
      ratio: Math.round(median(ratios.get(c.id)!) * 100) / 100,
    })),
  };
}

function table(results: readonly PayloadResult[]): string {
  const lines = [
    '| payload | contender | ns/op (median) | ratio to baseline |',
    '| --- | --- | ---: | ---: |',
  ];
  for (const payload of results) {
    const name = `${payload.label} (${payload.bytes} B, ${payload.keys} keys)`;
    for (const r of payload.results) {
      const label = r.id === 'core' ? `**${r.label}**` : r.label;
      lines.push(
        `| ${name} | ${label} | ${r.nsPerOp.toLocaleString('en-US')} | ${r.ratio.toFixed(2)}x |`,
      );
    }
  }
  return lines.join('\n');
}

export function runCanonicalBench(): PayloadResult[] {
  const startedAt = new Date();
  const results = payloads.map(measure);
  const environment = {
    node: process.version,
    v8: process.versions.v8,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    platform: `${process.platform}-${process.arch}`,
  };
  console.log('## Canonical JSON + SHA-256\n');
  console.log(
    `Node ${environment.node} (V8 ${environment.v8}), ${environment.cpu}. Median of ${ROUNDS} interleaved rounds; ratio = median of per-round ratios to JSON.stringify + SHA-256.\n`,
  );
  console.log(table(results));
  const dir = new URL('../results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    new URL('canonical.json', dir),
    `${JSON.stringify(
      {
        bench: 'canonical',
        startedAt: startedAt.toISOString(),
        rounds: ROUNDS,
        environment,
        payloads: results,
      },
      null,
      2,
    )}\n`,
  );
  if (sink === 0.5) console.log(sink); // keep the results observable
  return results;
}
