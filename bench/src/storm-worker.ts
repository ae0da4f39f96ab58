/**
 * Child process of the same-key storm (`storm.ts`). The scenario comes in `BENCH_STORM` (JSON).
 * For each round it fires `calls` concurrent calls of one tool call at the round's start time;
 * the process whose call runs the tool stamps the moment it hands the outcome to the store
 * (`complete` called) and when that returned; every call stamps when it resolved. Times are
 * wall-clock milliseconds (`performance.timeOrigin + performance.now()`): comparable across
 * processes on one machine. Prints one JSON line.
 */
import { createIdempotency, type IdempotencyStore } from '@idempotent-tools/core';

interface Scenario {
  engine: 'redis' | 'postgres';
  url: string;
  /** Redis key prefix / PostgreSQL table. */
  namespace: string;
  turnPrefix: string;
  calls: number;
  effectMs: number;
  /** Wall-clock start of each round. */
  starts: number[];
}

export interface StormRound {
  /** Set in the process that ran the tool: `complete` called / returned. */
  completeStart?: number;
  completeEnd?: number;
  /** When each call that replayed resolved. */
  replays: number[];
  executions: number;
  failures: string[];
}

const scenario = JSON.parse(process.env.BENCH_STORM ?? '{}') as Scenario;
const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let store: IdempotencyStore;
let close: () => Promise<void>;
if (scenario.engine === 'redis') {
  const { Redis } = await import('ioredis');
  const { createRedisStore } = await import('@idempotent-tools/store-redis');
  const redis = new Redis(scenario.url, { maxRetriesPerRequest: 1 });
  const redisStore = createRedisStore(redis, { prefix: scenario.namespace });
  store = redisStore;
  close = async () => {
    await redisStore.close();
    redis.disconnect();
  };
} else {
  const { Pool } = await import('pg');
  const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
  const pool = new Pool({ connectionString: scenario.url, max: 10 });
  const pgStore = createPostgresStore(pool, { table: scenario.namespace });
  store = pgStore;
  close = async () => {
    await pgStore.close();
    await pool.end();
  };
}

let stamps: StormRound | undefined;
const complete = store.complete.bind(store);
store.complete = async (input) => {
  const at = wall();
  const ok = await complete(input);
  if (stamps !== undefined) {
    stamps.completeStart = at;
    stamps.completeEnd = wall();
  }
  return ok;
};
const idempotency = createIdempotency({ store, ttl: 600_000 });

// Warm up: connections, scripts / prepared statements, the LISTEN / subscriber connection.
for (let i = 0; i < 20; i++) {
  await idempotency.run(
    { toolName: 'warm', turnId: `${scenario.turnPrefix}-warm-${process.pid}-${i}`, args: {} },
    () => i,
  );
}
await store.waitForChange?.(`${scenario.turnPrefix}-nothing`, 1);

const rounds: StormRound[] = [];
for (const [r, start] of scenario.starts.entries()) {
  const round: StormRound = { replays: [], executions: 0, failures: [] };
  stamps = round;
  await sleep(Math.max(0, start - wall()));
  const call = { toolName: 'storm', turnId: `${scenario.turnPrefix}-${r}`, args: { round: r } };
  await Promise.all(
    Array.from({ length: scenario.calls }, async () => {
      try {
        const result = await idempotency.run(call, async () => {
          round.executions++;
          await sleep(scenario.effectMs);
          return { round: r, pid: process.pid };
        });
        if (result.replayed) round.replays.push(wall());
      } catch (error) {
        round.failures.push(String((error as Error).message ?? error));
      }
    }),
  );
  rounds.push(round);
}
stamps = undefined;
await close();
process.stdout.write(`${JSON.stringify(rounds)}\n`);
