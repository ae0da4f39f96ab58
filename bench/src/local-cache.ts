/**
 * Local cache (issue 19): replays through the executor with and without `withLocalCache` in
 * front of the memory store and the Redis store (loopback), with ~1 KB of args and a ~1 KB
 * result. Per store: p50 of sequential replays (interleaved rounds) and replays/s with 64 in
 * flight (median over rounds); the cache's figures as ratios to the uncached ones of the same
 * round. Run alone: `node src/run.ts local-cache` (`BENCH_QUICK=1`: a smoke run).
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import {
  createIdempotency,
  createMemoryStore,
  type IdempotencyStore,
  withLocalCache,
} from '@idempotent-tools/core';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { Redis } from 'ioredis';
import { table, writeSection } from './stores.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const QUICK = process.env.BENCH_QUICK === '1';
const IN_FLIGHT = 64;
/** Completed keys replayed round-robin (all fit in the cache). */
const KEYS = 256;
const ROUNDS = QUICK ? 2 : 9;
const SEQUENTIAL_CALLS = QUICK ? 100 : 1000;
const SLICE_MS = QUICK ? 100 : 500;
const TTL_MS = 600_000;

/** ~1 KB of tool arguments, parsed from JSON like a model's. */
const ARGS = JSON.parse(
  JSON.stringify({
    customer: { id: 'cus_8f3a91d2', email: 'ada@example.com', name: 'Ada Lovelace' },
    currency: 'eur',
    items: Array.from({ length: 8 }, (_, i) => ({
      sku: `SKU-${1000 + i}`,
      title: `Item number ${i} with a fairly descriptive title`,
      quantity: 1 + (i % 3),
      unitPrice: 1999 + i * 100,
    })),
    shipping: { street: '12 Analytical Engine Way', city: 'London', postcode: 'N1 9GU' },
    note: 'Leave at the front desk; call before delivery if the parcel is large.',
  }),
) as Record<string, unknown>;
/** ~1 KB result. */
const RESULT = {
  orderId: 'ord_1042',
  status: 'created',
  lines: Array.from({ length: 8 }, (_, i) => ({
    sku: `SKU-${1000 + i}`,
    reserved: true,
    warehouse: `wh-${i % 3}`,
    eta: '2026-12-04T10:00:00.000Z',
    trackingHint: 'will be assigned at dispatch',
  })),
};

interface Subject {
  engine: string;
  cached: boolean;
  store: IdempotencyStore;
  replay: () => Promise<unknown>;
  executions: () => number;
}

function subject(engine: string, cached: boolean, inner: IdempotencyStore): Subject {
  const store = cached ? withLocalCache(inner, { maxEntries: KEYS * 2, ttl: 60_000 }) : inner;
  const idempotency = createIdempotency({ store, ttl: TTL_MS });
  let runs = 0;
  const tool = async () => {
    runs++;
    return RESULT;
  };
  const turns = Array.from({ length: KEYS }, () => randomUUID());
  let next = 0;
  const replay = () =>
    idempotency.run({ toolName: 'create_order', turnId: turns[next++ % KEYS]!, args: ARGS }, tool);
  return { engine, cached, store, replay, executions: () => runs };
}

/** Complete every key once, then check a round of replays runs nothing and returns the result. */
async function seed(s: Subject): Promise<void> {
  for (let i = 0; i < KEYS; i++) await s.replay();
  const expected = JSON.stringify(RESULT);
  for (let i = 0; i < KEYS; i++) {
    const r = (await s.replay()) as { value: unknown; replayed: boolean };
    if (!r.replayed || JSON.stringify(r.value) !== expected) throw new Error('bad replay');
  }
  if (s.executions() !== KEYS) throw new Error(`${s.engine}: a replay ran the tool`);
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

async function sequentialP50(op: () => Promise<unknown>): Promise<number> {
  const ns: number[] = [];
  for (let i = 0; i < SEQUENTIAL_CALLS; i++) {
    const t0 = process.hrtime.bigint();
    await op();
    ns.push(Number(process.hrtime.bigint() - t0));
  }
  return median(ns) / 1000;
}

async function callsPerSec(op: () => Promise<unknown>): Promise<number> {
  let calls = 0;
  const start = performance.now();
  const end = start + SLICE_MS;
  const worker = async () => {
    while (performance.now() < end) {
      await op();
      calls++;
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return (calls / (performance.now() - start)) * 1000;
}

interface Row {
  engine: string;
  p50Us: { uncached: number; cached: number; ratio: number };
  callsPerSec: { uncached: number; cached: number; ratio: number };
}

async function measure(engine: string, plain: Subject, cached: Subject): Promise<Row> {
  await seed(plain);
  await seed(cached);
  const p50 = { uncached: [] as number[], cached: [] as number[], ratio: [] as number[] };
  const cps = { uncached: [] as number[], cached: [] as number[], ratio: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? [plain, cached] : [cached, plain];
    const lat = new Map<Subject, number>();
    const thr = new Map<Subject, number>();
    for (const s of order) lat.set(s, await sequentialP50(s.replay));
    for (const s of order) thr.set(s, await callsPerSec(s.replay));
    p50.uncached.push(lat.get(plain)!);
    p50.cached.push(lat.get(cached)!);
    p50.ratio.push(lat.get(cached)! / lat.get(plain)!);
    cps.uncached.push(thr.get(plain)!);
    cps.cached.push(thr.get(cached)!);
    cps.ratio.push(thr.get(cached)! / thr.get(plain)!);
  }
  for (const s of [plain, cached]) {
    if (s.executions() !== KEYS) throw new Error(`${engine}: a replay ran the tool`);
  }
  const hits = (cached.store as ReturnType<typeof withLocalCache>).localCache.stats();
  if (hits.misses > KEYS * 2) throw new Error(`${engine}: the cache missed ${hits.misses} times`);
  const pick = (o: { uncached: number[]; cached: number[]; ratio: number[] }, digits: number) => ({
    uncached: Number(median(o.uncached).toFixed(digits)),
    cached: Number(median(o.cached).toFixed(digits)),
    ratio: Number(median(o.ratio).toFixed(3)),
  });
  return { engine, p50Us: pick(p50, 1), callsPerSec: pick(cps, 0) };
}

export async function runLocalCacheBench(): Promise<Row[]> {
  const startedAt = new Date();
  const rows: Row[] = [];
  rows.push(
    await measure(
      'memory',
      subject('memory', false, createMemoryStore()),
      subject('memory', true, createMemoryStore()),
    ),
  );
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const prefix = `bench:lc:${randomUUID().slice(0, 8)}:`;
  try {
    const store = createRedisStore(redis, { prefix });
    rows.push(
      await measure(
        'Redis (loopback)',
        subject('redis', false, store),
        subject('redis', true, store),
      ),
    );
  } finally {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
  }
  const x = (n: number) => `${n.toFixed(2)}x`;
  const body = `Run ${startedAt.toISOString()}, \`node src/run.ts local-cache\`${QUICK ? ' (BENCH_QUICK: smoke run, not for quoting)' : ''}; Node ${process.version}, ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]!.toFixed(1)}. Replays through \`createIdempotency({ store }).run\` of ${KEYS} completed keys round-robin, ~${Buffer.byteLength(JSON.stringify(ARGS))} B of args and a ~${Buffer.byteLength(JSON.stringify(RESULT))} B result; without and with \`withLocalCache(store, { maxEntries: ${KEYS * 2}, ttl: 60_000 })\` (every key cached: a hit rate of 100%, the best case). ${ROUNDS} interleaved rounds: p50 of ${SEQUENTIAL_CALLS} sequential replays, replays/s over ${SLICE_MS} ms with ${IN_FLIGHT} in flight; medians over the rounds, the ratio the median of the per-round ratios (cached ÷ uncached). One run on a noisy shared 2-core machine: read the ratios, not the µs. A cached replay still derives the key (canonical JSON + SHA-256 of the args), opens the outcome and parses it; only the store round trip is gone.

${table(
  [
    'store',
    ['p50 µs uncached', 'right'],
    ['p50 µs cached', 'right'],
    ['p50 cached ÷ uncached', 'right'],
    ['replays/s uncached (64)', 'right'],
    ['replays/s cached (64)', 'right'],
    ['replays/s cached ÷ uncached', 'right'],
  ],
  rows.map((r) => [
    r.engine,
    r.p50Us.uncached.toFixed(1),
    r.p50Us.cached.toFixed(1),
    x(r.p50Us.ratio),
    r.callsPerSec.uncached.toLocaleString('en-US'),
    r.callsPerSec.cached.toLocaleString('en-US'),
    x(r.callsPerSec.ratio),
  ]),
)}
`;
  console.log(`## Local cache\n\n${body}`);
  writeSection(new URL('../RESULTS.md', import.meta.url), '## Local cache', body);
  writeFileSync(
    new URL('../results/local-cache.json', import.meta.url),
    `${JSON.stringify({ startedAt, node: process.version, quick: QUICK, rounds: ROUNDS, keys: KEYS, rows }, null, 2)}\n`,
  );
  return rows;
}
