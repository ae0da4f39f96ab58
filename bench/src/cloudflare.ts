/**
 * The Durable Objects store (issue 30), in workerd through miniflare on this machine: a fresh
 * call and a replay, ~1 KB args and result, each one request to a Worker that runs the executor
 * on the store; an empty request to the same Worker is the baseline subtracted. Interleaved
 * rounds. Local workerd, not Cloudflare's network: the object is in the same process, so this is
 * the store's own cost (RPC, SQLite, the executor), not a datacenter's round trip.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { table, writeSection } from './stores.ts';

const ROUNDS = 5;
const CALLS = 200;

const percentile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

export async function runCloudflareBench(): Promise<void> {
  const bundled = await build({
    entryPoints: [fileURLToPath(new URL('./cloudflare-worker.ts', import.meta.url))],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    target: 'es2022',
    logLevel: 'silent',
  });
  const mf = new Miniflare({
    modules: true,
    script: bundled.outputFiles[0]?.text ?? '',
    compatibilityDate: '2026-07-30',
    durableObjects: { IDEMPOTENCY: { className: 'IdempotencyObject', useSQLite: true } },
  });
  const post = async (path: string, body: unknown) => {
    const started = performance.now();
    const response = await mf.dispatchFetch(`http://bench.test${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as { outcome?: string };
    return { ms: performance.now() - started, outcome: answer.outcome };
  };
  const samples = { noop: [] as number[], fresh: [] as number[], replay: [] as number[] };
  let n = 0;
  const start = loadavg()[0]!;
  for (let i = 0; i < 50; i++) await post('/run', { turnId: `warm-${i}` }); // warm up
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < CALLS; i++) {
      const turnId = `t${n++}`;
      samples.noop.push((await post('/noop', {})).ms);
      const fresh = await post('/run', { turnId });
      const replay = await post('/run', { turnId });
      if (fresh.outcome !== 'executed' || replay.outcome !== 'replayed') {
        throw new Error(`unexpected outcomes ${fresh.outcome}, ${replay.outcome}`);
      }
      samples.fresh.push(fresh.ms);
      samples.replay.push(replay.ms);
    }
  }
  const end = loadavg()[0]!;
  await mf.dispose();
  const base = percentile(samples.noop, 0.5);
  const us = (ms: number) => (ms * 1000).toFixed(0);
  const rows = [
    ['empty request (baseline)', us(base), us(percentile(samples.noop, 0.99)), '-', '0'],
    [
      'fresh call',
      us(percentile(samples.fresh, 0.5)),
      us(percentile(samples.fresh, 0.99)),
      us(percentile(samples.fresh, 0.5) - base),
      '2 (claim, complete)',
    ],
    [
      'replay',
      us(percentile(samples.replay, 0.5)),
      us(percentile(samples.replay, 0.99)),
      us(percentile(samples.replay, 0.5) - base),
      '1 (claim)',
    ],
  ];
  const body = `Node ${process.version}, ${cpus()[0]?.model ?? '?'}; load ${start.toFixed(2)} at start, ${end.toFixed(2)} at end. workerd through miniflare on this machine, ${ROUNDS} rounds x ${CALLS} (empty request, fresh, replay) sequential requests from Node, ~1 KB args and result; µs per request. RPCs to the object per call are the store's design (one per claim, complete), not measured here.\n\n${table(
    [
      'request',
      ['p50 µs', 'right'],
      ['p99 µs', 'right'],
      ['p50 minus baseline µs', 'right'],
      ['RPCs to the object', 'right'],
    ],
    rows,
  )}\n`;
  console.log(`## Durable Objects store (workerd, local)\n\n${body}`);
  writeSection(
    new URL('../RESULTS.md', import.meta.url),
    '## Durable Objects store (workerd, local)',
    body,
  );
  writeFileSync(
    new URL('../results/cloudflare.json', import.meta.url),
    `${JSON.stringify({ node: process.version, rows }, null, 2)}\n`,
  );
}
