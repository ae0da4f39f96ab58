/**
 * Opening the store under test on each client library, the same way in every worker and in the
 * checker: the client options are what each store's README recommends for fast failure during an
 * outage. Modelled on the stores' test helpers (packages/store-redis/src/test-utils/drivers.ts,
 * packages/store-postgres/src/test-utils/drivers.ts, packages/store-dynamodb/src/test-utils).
 */
import type { IdempotencyStore } from '@idempotent-tools/core';
import { wrapStore } from './store-mutations.ts';
import type { StoreConfig } from './types.ts';

export interface OpenStore {
  store: IdempotencyStore;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, ready: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** A Redis client (single node or cluster) on the named library. */
async function redisClient(config: StoreConfig): Promise<{ client: unknown; close(): void }> {
  const cluster = config.kind === 'cluster';
  const nodes = config.nodes ?? [{ host: config.host!, port: config.port! }];
  if (config.driver === 'node-redis') {
    const { createClient, createCluster } = await import('redis');
    const reconnectStrategy = (retries: number) => Math.min(retries * 50, 500);
    const client = cluster
      ? createCluster({
          rootNodes: nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
          defaults: { socket: { reconnectStrategy } },
        })
      : createClient({
          url: `redis://${nodes[0]!.host}:${nodes[0]!.port}`,
          socket: { reconnectStrategy },
        });
    client.on('error', () => {});
    await client.connect();
    return { client, close: () => void client.destroy() };
  }
  const lib =
    config.driver === 'iovalkey'
      ? ((await import('iovalkey')) as unknown as typeof import('ioredis'))
      : await import('ioredis');
  if (cluster) {
    const client = new lib.Cluster(nodes, {
      redisOptions: { maxRetriesPerRequest: 1 },
      clusterRetryStrategy: (times: number) => Math.min(times * 100, 1000),
    });
    client.on('error', () => {});
    await until(`${config.driver} cluster client`, () => client.status === 'ready');
    return { client, close: () => client.disconnect() };
  }
  const client = new lib.Redis(nodes[0]!.port, nodes[0]!.host, {
    maxRetriesPerRequest: 1,
    retryStrategy: (times: number) => Math.min(times * 50, 500),
  });
  client.on('error', () => {});
  await until(`${config.driver} client`, () => client.status === 'ready');
  return { client, close: () => client.disconnect() };
}

async function openRaw(config: StoreConfig): Promise<OpenStore> {
  switch (config.kind) {
    case 'sqlite': {
      const { createSqliteStore, openSqliteStore } = await import('@idempotent-tools/store-sqlite');
      // A short busy timeout: an outage (another process holding the lock) fails writes.
      const busyTimeoutMs = 2_000;
      if (config.driver === 'better-sqlite3') {
        const { default: Database } = await import('better-sqlite3');
        const db = new Database(config.path!, { timeout: busyTimeoutMs });
        const store = createSqliteStore(db, { busyTimeoutMs });
        return {
          store,
          close: async () => {
            await store.close();
            db.close();
          },
        };
      }
      const store = openSqliteStore(config.path!, { busyTimeoutMs });
      return { store, close: () => store.close() };
    }
    case 'redis':
    case 'cluster': {
      const { createRedisStore } = await import('@idempotent-tools/store-redis');
      const { client, close } = await redisClient(config);
      const store = createRedisStore(client as Parameters<typeof createRedisStore>[0], {
        prefix: config.prefix ?? 'chaos:',
        durable: true,
        // iovalkey 0.4's Cluster has no sharded subscribers (the store refuses 'sharded' there).
        ...(config.kind === 'cluster' && config.driver === 'iovalkey'
          ? { notifications: 'classic' as const }
          : {}),
      });
      return {
        store,
        close: async () => {
          await store.close();
          close();
        },
      };
    }
    case 'postgres': {
      const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
      const url = `postgres://root@${config.host}:${config.port}/${config.database ?? 'postgres'}`;
      if (config.driver === 'postgres.js') {
        const { default: postgres } = await import('postgres');
        const sql = postgres(url, {
          max: 4,
          connect_timeout: 3,
          onnotice: () => {},
          backoff: () => 0.1,
          connection: { application_name: 'idempotent-tools-chaos' },
        });
        const store = createPostgresStore(sql, { table: config.table ?? 'chaos_records' });
        return {
          store,
          close: async () => {
            await store.close();
            await sql.end({ timeout: 2 });
          },
        };
      }
      const { default: pg } = await import('pg');
      const pool = new pg.Pool({
        connectionString: url,
        max: 4,
        connectionTimeoutMillis: 3_000,
        application_name: 'idempotent-tools-chaos',
      });
      // Connections killed by a restart emit 'error' on the pool: without a handler the process dies.
      pool.on('error', () => {});
      const store = createPostgresStore(pool, { table: config.table ?? 'chaos_records' });
      return {
        store,
        close: async () => {
          await store.close();
          await pool.end();
        },
      };
    }
    case 'pglite': {
      const { PGlite } = await import('@electric-sql/pglite');
      const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
      const db = await PGlite.create(config.path!);
      const store = createPostgresStore(db, { table: config.table ?? 'chaos_records' });
      await store.ensureSchema();
      return {
        store,
        close: async () => {
          await store.close();
          await db.close();
        },
      };
    }
    case 'dynamodb': {
      const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
      const { createDynamoDbStore } = await import('@idempotent-tools/store-dynamodb');
      const client = new DynamoDBClient({
        endpoint: `http://${config.host}:${config.port}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        maxAttempts: 2,
      });
      const store = createDynamoDbStore({
        client,
        tableName: config.table ?? 'chaos-records',
        prefix: config.prefix ?? 'chaos',
      });
      return {
        store,
        close: async () => {
          await store.close();
          client.destroy();
        },
      };
    }
  }
}

export async function openStore(config: StoreConfig): Promise<OpenStore> {
  const opened = await openRaw(config);
  if (config.wrap === undefined) return opened;
  return { store: wrapStore(opened.store, config.wrap), close: opened.close };
}
