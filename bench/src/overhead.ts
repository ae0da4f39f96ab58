/**
 * Memory-store overhead per call against the raw function (issue #9): what the executor itself
 * costs when the store costs nothing. Interleaved rounds, medians.
 */
import { writeFileSync } from 'node:fs';
import { createIdempotency, createMemoryStore } from '@idempotent-tools/core';
import { table, writeSection } from './stores.ts';

const ROUNDS = 15;
const CALLS = 20_000;

const args = { customer: 'cus_42', amount: 1999, currency: 'usd', note: 'order 1001, two items' };
const tool = async (a: typeof args) => ({ chargeId: 'ch_1', amount: a.amount });

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
  let fresh = 0;
  const contenders: Record<string, (i: number) => Promise<unknown>> = {
    'raw function': () => tool(args),
    'run, replay (memory store)': () =>
      idempotency.run({ toolName: 'charge', turnId: 'replayed', args }, tool),
    'run, fresh (memory store)': () =>
      idempotency.run({ toolName: 'charge', turnId: `t${fresh++}`, args }, tool),
  };
  const samples: Record<string, number[]> = Object.fromEntries(
    Object.keys(contenders).map((k) => [k, []]),
  );
  for (const run of Object.values(contenders)) await time(2_000, run); // warm up
  for (let round = 0; round < ROUNDS; round++) {
    const names = Object.keys(contenders);
    if (round % 2 === 1) names.reverse();
    for (const name of names) samples[name]!.push(await time(CALLS, contenders[name]!));
  }
  const raw = median(samples['raw function']!);
  const rows = Object.entries(samples).map(([name, xs]) => {
    const ns = median(xs);
    return [
      name,
      (ns / 1000).toFixed(2),
      name === 'raw function' ? '-' : ((ns - raw) / 1000).toFixed(2),
    ];
  });
  const body = `Node ${process.version}; ${ROUNDS} interleaved rounds x ${CALLS.toLocaleString('en')} sequential calls; median µs per call. The args are a 4-field object; a fresh call includes the amortised sweep of the memory store.\n\n${table(['contender', ['µs/call', 'right'], ['overhead µs', 'right']], rows)}\n`;
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
