/**
 * `node src/run.ts scale`: per-call latency of each durable store with 1,000,000 records
 * against the empty store, and bytes per record. Per engine: measure (empty), bulk-load
 * `SCALE_RECORDS` finished records in the store's own layout, measure (full), delete them,
 * measure (empty again: bounds the machine's drift). Each measure is `ROUNDS` interleaved
 * rounds of sequential fresh calls and replays; the figure is the p50 over all calls.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { createIdempotency, type IdempotencyStore } from '@idempotent-tools/core';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteStore } from '@idempotent-tools/store-sqlite';
import { Redis } from 'ioredis';
import { Pool } from 'pg';
import { ARGS, RUN, TOOL } from './store-contenders.ts';
import { table, writeSection } from './stores.ts';

const RECORDS = Number(process.env.SCALE_RECORDS ?? 1_000_000);
const ROUNDS = 6;
const CALLS = 300;
const ONLY = process.env.BENCH_STORES?.split(',').map((s) => s.trim());
const OUTCOME = JSON.stringify({
  v: { ticketId: 'T-1042', status: 'created', queue: 'it-support' },
});
const META = JSON.stringify({ toolName: TOOL, turnId: 'turn-filler' });

interface Phase {
  freshP50Us: number;
  replayP50Us: number;
}
interface ScaleResult {
  engine: string;
  empty: Phase;
  full: Phase;
  emptyAfter: Phase;
  loadSeconds: number;
  bytesPerRecord: number;
  bytesHow: string;
}

const p50 = (ns: number[]) => {
  const s = [...ns].sort((a, b) => a - b);
  return Math.round(s[Math.floor(s.length / 2)]! / 100) / 10;
};

async function phase(store: IdempotencyStore, tag: string): Promise<Phase> {
  const idem = createIdempotency({ store, ttl: 3_600_000 });
  const tool = () => ({ ok: true });
  const seeds: string[] = [];
  for (let i = 0; i < 200; i++) {
    const turnId = `scale-${RUN}-${tag}-seed-${i}`;
    await idem.run({ toolName: TOOL, turnId, args: ARGS }, tool);
    seeds.push(turnId);
  }
  const fresh: number[] = [];
  const replay: number[] = [];
  let n = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? ['fresh', 'replay'] : ['replay', 'fresh'];
    for (const mode of order) {
      for (let i = 0; i < CALLS; i++) {
        const turnId = mode === 'fresh' ? `scale-${RUN}-${tag}-${n++}` : seeds[i % seeds.length]!;
        const t0 = process.hrtime.bigint();
        await idem.run({ toolName: TOOL, turnId, args: ARGS }, tool);
        (mode === 'fresh' ? fresh : replay).push(Number(process.hrtime.bigint() - t0));
      }
    }
  }
  return { freshP50Us: p50(fresh), replayP50Us: p50(replay) };
}

async function redisScale(): Promise<ScaleResult> {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const prefix = `bench:${RUN}:scale:`;
  const store = createRedisStore(redis, { prefix });
  const drop = async () => {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  };
  try {
    const empty = await phase(store, 'e1');
    const started = performance.now();
    const [s] = await redis.time();
    const now = Number(s) * 1000;
    const exp = now + 3_600_000;
    for (let i = 0; i < RECORDS; i += 10_000) {
      const pipeline = redis.pipeline();
      for (let j = i; j < Math.min(RECORDS, i + 10_000); j++) {
        const value = `C\t${now}\t${exp}\t${now}\t${now}\t${randomUUID()}\tfp-${j}\t${META}\n${OUTCOME}`;
        pipeline.set(`${prefix}{filler-${j}}`, value, 'PXAT', exp);
      }
      await pipeline.exec();
    }
    const loadSeconds = (performance.now() - started) / 1000;
    const sample = await Promise.all(
      Array.from({ length: 200 }, (_, k) =>
        redis.memory('USAGE', `${prefix}{filler-${(k * 4999) % RECORDS}}`),
      ),
    );
    const bytes = sample.reduce<number>((a, b) => a + Number(b), 0) / sample.length;
    const full = await phase(store, 'full');
    await drop();
    const emptyAfter = await phase(store, 'e2');
    return {
      engine: 'Redis',
      empty,
      full,
      emptyAfter,
      loadSeconds,
      bytesPerRecord: Math.round(bytes),
      bytesHow: '`MEMORY USAGE` of 200 sampled keys (key + value + overhead)',
    };
  } finally {
    await store.close();
    await drop();
    redis.disconnect();
  }
}

async function postgresScale(): Promise<ScaleResult> {
  const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
  const pool = new Pool({
    connectionString: process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test',
    max: 4,
  });
  const table = `bench_${RUN}_scale`;
  const store = createPostgresStore(pool, { table });
  await store.ensureSchema();
  try {
    const empty = await phase(store, 'e1');
    const started = performance.now();
    await pool.query(
      `INSERT INTO ${table} (key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, outcome, tool_name, turn_id)
       SELECT 'filler-' || i, 'completed', 'fp-' || i, md5(i::text), n, n + 3600000, n, n, $1, $2, 'turn-filler'
       FROM generate_series(1, $3::int) i, (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS n) c`,
      [OUTCOME, TOOL, RECORDS],
    );
    await pool.query(`VACUUM ANALYZE ${table}`);
    const loadSeconds = (performance.now() - started) / 1000;
    const { rows } = await pool.query(
      `SELECT pg_total_relation_size('${table}')::float8 / count(*) AS b FROM ${table}`,
    );
    const full = await phase(store, 'full');
    await pool.query(`TRUNCATE ${table}`);
    const emptyAfter = await phase(store, 'e2');
    return {
      engine: 'PostgreSQL',
      empty,
      full,
      emptyAfter,
      loadSeconds,
      bytesPerRecord: Math.round(Number(rows[0].b)),
      bytesHow: '`pg_total_relation_size` (heap + TOAST + both indexes) / rows',
    };
  } finally {
    await store.close();
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  }
}

async function sqliteScale(): Promise<ScaleResult> {
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-scale-'));
  const file = join(dir, 'scale.db');
  const db = new DatabaseSync(file);
  const store = createSqliteStore(db, { table: 'scale' });
  try {
    const empty = await phase(store, 'e1');
    const started = performance.now();
    const now = Date.now();
    const insert = db.prepare(
      `INSERT INTO scale (key, state, fingerprint, token, lease_expires_at, expires_at, created_at, completed_at, outcome, tool_name, turn_id)
       VALUES (?, 'completed', ?, ?, ?, ?, ?, ?, ?, ?, 'turn-filler')`,
    );
    db.exec('BEGIN');
    for (let i = 0; i < RECORDS; i++) {
      insert.run(
        `filler-${i}`,
        `fp-${i}`,
        randomUUID(),
        now,
        now + 3_600_000,
        now,
        now,
        OUTCOME,
        TOOL,
      );
    }
    db.exec('COMMIT');
    db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    const loadSeconds = (performance.now() - started) / 1000;
    const bytes = statSync(file).size / RECORDS;
    const full = await phase(store, 'full');
    db.exec("DELETE FROM scale WHERE key LIKE 'filler-%'");
    const emptyAfter = await phase(store, 'e2');
    return {
      engine: 'SQLite',
      empty,
      full,
      emptyAfter,
      loadSeconds,
      bytesPerRecord: Math.round(bytes),
      bytesHow: 'database file size / rows (after a WAL checkpoint)',
    };
  } finally {
    await store.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runScaleBench(): Promise<ScaleResult[]> {
  const startedAt = new Date();
  const results: ScaleResult[] = [];
  const engines: [string, () => Promise<ScaleResult>][] = [
    ['redis', redisScale],
    ['postgres', postgresScale],
    ['sqlite', sqliteScale],
  ];
  for (const [id, run] of engines) {
    if (ONLY !== undefined && !ONLY.includes(id)) continue;
    const r = await run();
    results.push(r);
    console.log(JSON.stringify(r));
  }
  const pct = (a: number, b: number) => `${a >= b ? '+' : ''}${Math.round(((a - b) / b) * 100)}%`;
  const rows = results.map((r) => {
    const base = (m: keyof Phase) => Math.min(r.empty[m], r.emptyAfter[m]);
    return [
      r.engine,
      `${r.empty.freshP50Us} / ${r.emptyAfter.freshP50Us}`,
      `${r.full.freshP50Us} (${pct(r.full.freshP50Us, base('freshP50Us'))})`,
      `${r.empty.replayP50Us} / ${r.emptyAfter.replayP50Us}`,
      `${r.full.replayP50Us} (${pct(r.full.replayP50Us, base('replayP50Us'))})`,
      r.bytesPerRecord.toLocaleString('en-US'),
      r.loadSeconds.toFixed(1),
    ];
  });
  const columns: (string | [string, 'right'])[] = [
    'store',
    ['fresh p50 µs empty (before / after)', 'right'],
    ['fresh p50 µs full', 'right'],
    ['replay p50 µs empty (before / after)', 'right'],
    ['replay p50 µs full', 'right'],
    ['bytes / record', 'right'],
    ['load s', 'right'],
  ];
  const markdown = `Run ${startedAt.toISOString()}, \`tsx src/run.ts scale\`; ${RECORDS.toLocaleString('en-US')} finished records bulk-loaded in each store's own layout (Redis: pipelined \`SET ... PXAT\`; PostgreSQL: one \`INSERT ... SELECT generate_series\`; SQLite: one transaction), then deleted. p50 of ${ROUNDS} interleaved rounds x ${CALLS} sequential calls through the executor, on the empty store before the load, full, and empty again after the delete (the two empty figures bound the machine's drift; the % compares full with the faster of them, the strict reading). Bytes per record: Redis ${results.find((r) => r.engine === 'Redis')?.bytesHow ?? ''}; PostgreSQL ${results.find((r) => r.engine === 'PostgreSQL')?.bytesHow ?? ''}; SQLite ${results.find((r) => r.engine === 'SQLite')?.bytesHow ?? ''}. A record here: ~120 B outcome, UUID token, short fingerprint, tool name + turn id meta.

${table(columns, rows)}
`;
  writeSection(
    new URL('../RESULTS.md', import.meta.url),
    '## Scale: 1,000,000 records (issue #9)',
    markdown,
  );
  writeFileSync(
    new URL('../results/scale.json', import.meta.url),
    `${JSON.stringify({ bench: 'scale', startedAt, records: RECORDS, results }, null, 2)}\n`,
  );
  return results;
}
