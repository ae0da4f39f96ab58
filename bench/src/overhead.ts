/**
 * Memory-store overhead per call against the raw function (issue #9): what the executor itself
 * costs when the store costs nothing. Interleaved rounds, medians.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { createIdempotency, createMemoryStore } from '@idempotent-tools/core';
import { ORDER, ORDER_RESULT, parsed } from './payloads.ts';
import { table, writeSection } from './stores.ts';

const ROUNDS = 15;
const CALLS = 10_000;

const args = { customer: 'cus_42', amount: 1999, currency: 'usd', note: 'order 1001, two items' };
const tool = async (a: typeof args) => ({ chargeId: 'ch_1', amount: a.amount });
// The shape of a real tool call: ~1 KB of args (parsed from JSON, schema key order), ~1 KB result.
const bigArgs = parsed(ORDER);
const bigResult = parsed(ORDER_RESULT);
const bigTool = async (_a: typeof bigArgs) => bigResult;

async function time(calls: number, one: (i: number) => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await one(i);
  return Number(process.hrtime.bigint() - start) / calls;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

export async function runOverheadBench(): Promise<void> {
  const idempotency = createIdempotency({ store: createMemoryStore() });
  await idempotency.run({ toolName: 'charge', turnId: 'replayed', args }, tool);
  await idempotency.run({ toolName: 'place_order', turnId: 'replayed', args: bigArgs }, bigTool);
  let fresh = 0;
  const contenders: Record<string, (i: number) => Promise<unknown>> = {
    'raw function': () => tool(args),
    'run, replay (memory store)': () =>
      idempotency.run({ toolName: 'charge', turnId: 'replayed', args }, tool),
    'run, fresh (memory store)': () =>
      idempotency.run({ toolName: 'charge', turnId: `t${fresh++}`, args }, tool),
    'raw function, ~1 KB': () => bigTool(bigArgs),
    'run, replay, ~1 KB': () =>
      idempotency.run({ toolName: 'place_order', turnId: 'replayed', args: bigArgs }, bigTool),
    'run, fresh, ~1 KB': () =>
      idempotency.run({ toolName: 'place_order', turnId: `t${fresh++}`, args: bigArgs }, bigTool),
  };
  // BENCH_CORE_BEFORE=<dist dir of an older build of core>: its executor runs in the same rounds
  // (the before / after of a change, measured side by side on one machine).
  const before = process.env.BENCH_CORE_BEFORE;
  if (before !== undefined) {
    const old = (await import(`${before}/index.js`)) as typeof import('@idempotent-tools/core');
    const idem = old.createIdempotency({ store: old.createMemoryStore() });
    await idem.run({ toolName: 'charge', turnId: 'replayed', args }, tool);
    await idem.run({ toolName: 'place_order', turnId: 'replayed', args: bigArgs }, bigTool);
    Object.assign(contenders, {
      'before: run, replay (memory store)': () =>
        idem.run({ toolName: 'charge', turnId: 'replayed', args }, tool),
      'before: run, fresh (memory store)': () =>
        idem.run({ toolName: 'charge', turnId: `t${fresh++}`, args }, tool),
      'before: run, replay, ~1 KB': () =>
        idem.run({ toolName: 'place_order', turnId: 'replayed', args: bigArgs }, bigTool),
      'before: run, fresh, ~1 KB': () =>
        idem.run({ toolName: 'place_order', turnId: `t${fresh++}`, args: bigArgs }, bigTool),
    });
  }
  const samples: Record<string, number[]> = Object.fromEntries(
    Object.keys(contenders).map((k) => [k, []]),
  );
  const start = loadavg()[0]!;
  for (const run of Object.values(contenders)) await time(2_000, run); // warm up
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(contenders);
    if (round % 2 === 1) names.reverse();
    for (const name of names) samples[name]!.push(await time(CALLS, contenders[name]!));
  }
  const end = loadavg()[0]!;
  const raw = median(samples['raw function']!);
  const rawBig = median(samples['raw function, ~1 KB']!);
  const rows = Object.entries(samples).map(([name, xs]) => {
    const ns = median(xs);
    const base = name.includes('~1 KB') ? rawBig : raw;
    return [
      name,
      (ns / 1000).toFixed(2),
      name.startsWith('raw function') ? '-' : ((ns - base) / 1000).toFixed(2),
    ];
  });
  const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));
  const body = `Node ${process.version}, ${cpus()[0]?.model ?? '?'}; load ${start.toFixed(2)} at start, ${end.toFixed(2)} at end. ${ROUNDS} interleaved rounds x ${CALLS.toLocaleString('en')} sequential calls; median µs per call. Small: a 4-field object (${bytes(args)} B of args); ~1 KB: ${bytes(bigArgs)} B of args, a ${bytes(bigResult)} B result. The overhead is the call minus the raw function of the same payload; a fresh call includes the amortised sweep of the memory store.\n\n${table(['contender', ['µs/call', 'right'], ['overhead µs', 'right']], rows)}\n`;
  console.log(`## Executor overhead (memory store)\n\n${body}`);
  writeSection(
    new URL('../RESULTS.md', import.meta.url),
    '## Executor overhead (memory store)',
    body,
  );
  writeFileSync(
    new URL('../results/overhead.json', import.meta.url),
    `${JSON.stringify({ node: process.version, rounds: ROUNDS, calls: CALLS, usPerCall: Object.fromEntries(rows.map((r) => [r[0], Number(r[1])])) }, null, 2)}\n`,
  );
}
