/**
 * Same-key storm (issue #9): 1,000 concurrent callers of one tool call, spread over 4 OS
 * processes, on one key. One call runs the tool (it takes `EFFECT_MS`); the 999 others wait
 * (pub/sub for Redis, LISTEN/NOTIFY for PostgreSQL) and replay its outcome. Measured per round:
 * the time from the holder's completion (the moment it hands the outcome to `complete`) to each
 * waiter's replay, p50 / p99 / max (max = the last waiter). Target: p99 <= 5 ms on loopback.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { RUN } from './store-contenders.ts';
import { table, writeSection } from './stores.ts';
import type { StormRound } from './storm-worker.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const PROCESSES = 4;
const CALLS = 250;
const EFFECT_MS = 100;
const ROUNDS = Number(process.env.BENCH_STORM_ROUNDS ?? 15);
const ROUND_MS = 1_000;
const ONLY = process.env.BENCH_STORES?.split(',').map((s) => s.trim());

interface EngineStorm {
  engine: 'redis' | 'postgres';
  rounds: {
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
    completeMs: number;
    replays: number;
    executions: number;
  }[];
  /** Median over the rounds of each round's p50 / p99 / max. */
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** All waiters of all rounds pooled. */
  pooledP50Ms: number;
  pooledP99Ms: number;
  failures: string[];
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const pct = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
const r2 = (n: number) => Math.round(n * 100) / 100;

function worker(env: Record<string, string>): Promise<StormRound[]> {
  const file = fileURLToPath(new URL('./storm-worker.ts', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, file], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`storm worker exited ${code}: ${err}`));
      else resolve(JSON.parse(out.trim().split('\n').at(-1)!) as StormRound[]);
    });
  });
}

async function storm(engine: 'redis' | 'postgres'): Promise<EngineStorm> {
  let cleanup: () => Promise<void>;
  let namespace: string;
  if (engine === 'redis') {
    const { Redis } = await import('ioredis');
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    namespace = `bench:${RUN}:storm:`;
    cleanup = async () => {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
      redis.disconnect();
    };
  } else {
    const { Pool } = await import('pg');
    const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
    const pool = new Pool({ connectionString: DATABASE_URL, max: 2 });
    namespace = `bench_${RUN}_storm`;
    const store = createPostgresStore(pool, { table: namespace });
    await store.ensureSchema();
    cleanup = async () => {
      await store.close();
      await pool.query(`DROP TABLE IF EXISTS ${namespace}`);
      await pool.end();
    };
  }
  try {
    // Workers need ~1-2 s to start and warm up; then one round per ROUND_MS.
    const first = Date.now() + 4_000;
    const starts = Array.from({ length: ROUNDS }, (_, i) => first + i * ROUND_MS);
    const scenario = {
      engine,
      url: engine === 'redis' ? REDIS_URL : DATABASE_URL,
      namespace,
      turnPrefix: `storm-${RUN}-${engine}`,
      calls: CALLS,
      effectMs: EFFECT_MS,
      starts,
    };
    const reports = await Promise.all(
      Array.from({ length: PROCESSES }, () => worker({ BENCH_STORM: JSON.stringify(scenario) })),
    );
    const failures: string[] = [];
    const rounds = starts.map((_, r) => {
      const per = reports.map((rep) => rep[r]!);
      const holder = per.find((p) => p.completeStart !== undefined);
      const executions = per.reduce((a, p) => a + p.executions, 0);
      for (const p of per) failures.push(...p.failures);
      if (holder === undefined || executions !== 1) {
        throw new Error(`${engine} round ${r}: ${executions} executions, holder ${holder}`);
      }
      const waits = per
        .flatMap((p) => p.replays)
        .map((t) => t - holder.completeStart!)
        .sort((a, b) => a - b);
      return {
        p50Ms: r2(pct(waits, 0.5)),
        p99Ms: r2(pct(waits, 0.99)),
        maxMs: r2(waits.at(-1)!),
        completeMs: r2(holder.completeEnd! - holder.completeStart!),
        replays: waits.length,
        executions,
        waits,
      };
    });
    const pooled = rounds.flatMap((r) => r.waits).sort((a, b) => a - b);
    return {
      engine,
      rounds: rounds.map(({ waits: _, ...rest }) => rest),
      p50Ms: r2(median(rounds.map((r) => r.p50Ms))),
      p99Ms: r2(median(rounds.map((r) => r.p99Ms))),
      maxMs: r2(median(rounds.map((r) => r.maxMs))),
      pooledP50Ms: r2(pct(pooled, 0.5)),
      pooledP99Ms: r2(pct(pooled, 0.99)),
      failures: [...new Set(failures)],
    };
  } finally {
    await cleanup();
  }
}

export async function runStormBench(): Promise<EngineStorm[]> {
  const startedAt = new Date();
  const load = loadavg().map(r2);
  const results: EngineStorm[] = [];
  for (const engine of ['redis', 'postgres'] as const) {
    if (ONLY !== undefined && !ONLY.includes(engine)) continue;
    const result = await storm(engine);
    results.push(result);
    console.log(
      `${engine}: ${ROUNDS} storms of ${PROCESSES} x ${CALLS} calls; holder complete -> waiter replay p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, last ${result.maxMs} ms (medians over rounds); pooled p50 ${result.pooledP50Ms} / p99 ${result.pooledP99Ms} ms; rounds p99 ${result.rounds.map((r) => r.p99Ms).join(', ')}${result.failures.length > 0 ? `; FAILURES ${result.failures.join('; ')}` : ''}`,
    );
  }
  const title = { redis: 'Redis (pub/sub)', postgres: 'PostgreSQL (LISTEN/NOTIFY)' };
  const rows = results.map((r) => [
    title[r.engine],
    String(r.p50Ms),
    String(r.p99Ms),
    String(r.maxMs),
    `${r.pooledP50Ms} / ${r.pooledP99Ms}`,
    String(r2(median(r.rounds.map((x) => x.completeMs)))),
    r.p99Ms <= 5 ? 'PASS' : '**FAIL**',
  ]);
  const columns: (string | [string, 'right'])[] = [
    'store',
    ['p50 ms', 'right'],
    ['p99 ms', 'right'],
    ['last waiter ms', 'right'],
    ['pooled p50 / p99 ms', 'right'],
    ["holder's `complete` ms", 'right'],
    'p99 <= 5 ms',
  ];
  const markdown = `Run ${startedAt.toISOString()}, \`tsx src/run.ts storm\`. ${availableParallelism()} cores, Node ${process.version}, load average ${load.join(' / ')} at start; servers on loopback.

${ROUNDS} storms per engine: ${PROCESSES} OS processes x ${CALLS} concurrent calls of one tool call (one key), started together; the tool takes ${EFFECT_MS} ms, so the 999 others wait. Measured: from the moment the holder calls \`complete\` to each waiter's replay resolving (wall clock, comparable across processes). p50 / p99 / last = medians over the storms of each storm's value; pooled = all waiters of all storms. Target (issue #9): p99 <= 5 ms.

${table(columns, rows)}
`;
  writeSection(new URL('../RESULTS.md', import.meta.url), '## Same-key storm (issue #9)', markdown);
  const dir = new URL('../results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    new URL('storm.json', dir),
    `${JSON.stringify({ bench: 'storm', startedAt, load, results }, null, 2)}\n`,
  );
  return results;
}
