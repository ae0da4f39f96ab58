/**
 * Opening the store under test, the same way in every worker and in the checker: the client
 * options are what each store's README recommends for fast failure during an outage.
 */
import type { IdempotencyStore } from '@idempotent-tools/core';
import type { StoreConfig } from './types.ts';

export interface OpenStore {
  store: IdempotencyStore;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolve when `ready` says so, polling; reject after `timeoutMs`. */
async function until(what: string, ready: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await sleep(20);
  }
}

export async function openStore(config: StoreConfig): Promise<OpenStore> {
  switch (config.kind) {
    case 'sqlite': {
      const { openSqliteStore } = await import('@idempotent-tools/store-sqlite');
      const store = openSqliteStore(config.path, { busyTimeoutMs: 10_000 });
      return { store, close: () => store.close() };
    }
    case 'redis': {
      const { Redis } = await import('ioredis');
      const { createRedisStore } = await import('@idempotent-tools/store-redis');
      const redis = new Redis(config.url, {
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(times * 50, 500),
      });
      redis.on('error', () => {});
      await until('redis client', () => redis.status === 'ready');
      const store = createRedisStore(redis, { prefix: config.prefix, durable: true });
      return {
        store,
        close: async () => {
          await store.close();
          redis.disconnect();
        },
      };
    }
    case 'cluster': {
      const { Cluster } = await import('ioredis');
      const { createRedisStore } = await import('@idempotent-tools/store-redis');
      const cluster = new Cluster(config.nodes, {
        redisOptions: { maxRetriesPerRequest: 1 },
        clusterRetryStrategy: (times) => Math.min(times * 100, 1000),
      });
      cluster.on('error', () => {});
      await until('redis cluster client', () => cluster.status === 'ready');
      const store = createRedisStore(cluster, { prefix: config.prefix, durable: true });
      return {
        store,
        close: async () => {
          await store.close();
          cluster.disconnect();
        },
      };
    }
    case 'postgres': {
      const { default: pg } = await import('pg');
      const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
      const pool = new pg.Pool({
        connectionString: config.url,
        max: 4,
        connectionTimeoutMillis: 3_000,
        application_name: 'idempotent-tools-chaos',
      });
      // Connections killed by a restart emit 'error' on the pool: without a handler the process dies.
      pool.on('error', () => {});
      const store = createPostgresStore(pool, { table: config.table });
      return {
        store,
        close: async () => {
          await store.close();
          await pool.end();
        },
      };
    }
  }
}
