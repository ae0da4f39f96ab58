/**
 * The contenders of the store bench (`stores.ts`), one engine at a time: Redis, PostgreSQL,
 * SQLite and DynamoDB (dynalite). Every contender makes the same tool call idempotent with its
 * library's documented usage, once per payload shape (`PAYLOADS`); every engine can count the
 * requests (Redis commands, SQL statements, DynamoDB requests) a call costs.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import {
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { PGlite } from '@electric-sql/pglite';
import { createIdempotency, type IdempotencyStore, withLocalCache } from '@idempotent-tools/core';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteStore } from '@idempotent-tools/store-sqlite';
import { Idempotency as NodeIdempotency } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { createClient } from '@redis/client';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { Pool } from 'pg';
import postgres from 'postgres';
import { ORDER, ORDER_RESULT, parsed } from './payloads.ts';

/** The bench's records: 1 h everywhere (Powertools' default), deleted at the end of the run. */
export const TTL_MS = 3_600_000;
/** Keys, tables and prefixes of this run. */
export const RUN = randomUUID().slice(0, 8);

/** The tool of the `small` payload: a create-ticket call with ~120 B of arguments. */
export const TOOL = 'create_ticket';
export const ARGS = {
  title: 'Printer on floor 3 is out of toner',
  priority: 'high',
  queue: 'it-support',
  requester: 'u_8f3a91d2',
};
export const RESULT = { ticketId: 'T-1042', status: 'created', queue: 'it-support' };

export type PayloadId = 'small' | '1kb';

/** One shape of tool call: its arguments and what the tool returns. */
export interface Payload {
  readonly id: PayloadId;
  readonly toolName: string;
  readonly args: Record<string, unknown>;
  readonly result: Record<string, unknown>;
}

/**
 * `small`: a create-ticket call (~120 B of args, ~60 B result). `1kb`: a create-order call, the
 * ~1 KB order of the canonical bench (39 keys, nested objects and arrays, non-ASCII text) and a
 * ~1 KB result. Both parsed from JSON, like a model's tool-call arguments.
 */
export const PAYLOADS: readonly Payload[] = [
  { id: 'small', toolName: TOOL, args: parsed(ARGS), result: parsed(RESULT) },
  { id: '1kb', toolName: 'create_order', args: parsed(ORDER), result: parsed(ORDER_RESULT) },
];

/**
 * The value every unit reads (a bare GET / point SELECT / GetItem): the payload's stored outcome
 * as the hand-written baselines store it, `{"v": result}` (the result's JSON + 6 B).
 */
export const storedOutcome = (payload: Payload): string => JSON.stringify({ v: payload.result });

/** A trivial tool that counts its runs (to check that a fresh call runs it, a replay not). */
function tool(payload: Payload): {
  run: (args: Record<string, unknown>) => Record<string, unknown>;
  executions: () => number;
} {
  let runs = 0;
  return {
    run: () => {
      runs++;
      return payload.result;
    },
    executions: () => runs,
  };
}

export interface Contender {
  /** The contender (library and client), the same for every payload. */
  readonly id: string;
  readonly payload: PayloadId;
  readonly label: string;
  /** Id of the unit (a bare read through the same client library) its latency is divided by. */
  readonly unit: string;
  /** `@idempotent-tools`' own store (the first such row of an engine is "ours" in the ratios). */
  readonly ours?: boolean;
  /** How the contender is used, one line for the README / report. */
  readonly how: string;
  /** One idempotent call of the tool through the library; the turn id picks the key. */
  call(turnId: string): Promise<unknown>;
  /** How many times the contender's tool ran. */
  executions(): number;
}

/** A bare read: the round trip everything else is compared with. */
export interface Unit {
  readonly id: string;
  /** The read value has the size of this payload's stored outcome. */
  readonly payload: PayloadId;
  readonly label: string;
  run(): Promise<unknown>;
}

/** Requests per call of one operation, counted around a sample of calls. */
export interface Counted {
  /** Requests the client sent (Redis commands incl. EVALSHA, SQL statements) per call. */
  requests: number;
  /** Commands the server executed per call, including those inside Lua scripts (Redis). */
  executed: number;
  /** Per call, by command / statement. */
  by: Record<string, number>;
}

export interface Engine {
  readonly id: 'redis' | 'postgres' | 'sqlite' | 'dynamodb';
  readonly title: string;
  /** Server / library version. */
  readonly version: string;
  /** Settings that decide the numbers (persistence, fsync, journal mode). */
  readonly settings: string;
  /** What a "request" is: `command` or `statement`. */
  readonly requestName: string;
  readonly units: readonly Unit[];
  readonly contenders: readonly Contender[];
  /**
   * CPU seconds the server process has used so far (Redis: `INFO cpu`), when it can tell. It
   * counts every client of the server, not only the bench's.
   */
  serverCpu?(): Promise<number>;
  /** Delete every record of the run (between throughput rounds); the units keep working. */
  clear?(): Promise<void>;
  /** Count the requests of `calls` sequential runs of `op` on behalf of `target` (a subject id). */
  count(target: string, op: () => Promise<unknown>, calls: number): Promise<Counted>;
  /** Delete the bench's keys / tables, close every connection. */
  close(): Promise<void>;
}

type Idempotency = ReturnType<typeof createIdempotency>;

/** Ours: the whole executor path, `idempotency.run(call, tool)`, for each payload. */
function oursFor(
  idempotency: Idempotency,
  base: { id: string; label: string; unit: string; how: string },
): Contender[] {
  return PAYLOADS.map((payload) => {
    const t = tool(payload);
    return {
      ...base,
      payload: payload.id,
      ours: true,
      call: async (turnId: string) =>
        (await idempotency.run({ toolName: payload.toolName, turnId, args: payload.args }, t.run))
          .value,
      executions: t.executions,
    };
  });
}

type PowertoolsLayer = NonNullable<Parameters<typeof makeIdempotent>[1]>['persistenceStore'];

/** Powertools: `makeIdempotent` over a persistence layer, for each payload. */
function powertoolsFor(
  layer: () => PowertoolsLayer,
  keyPrefix: string,
  base: { id: string; label: string; unit: string; how: string },
): Contender[] {
  return PAYLOADS.map((payload) => {
    const t = tool(payload);
    const config = new IdempotencyConfig({ expiresAfterSeconds: TTL_MS / 1000 });
    // Outside Lambda: without a remaining time, an in-progress record never expires its lock and
    // concurrent duplicates both run (the note).
    config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 } as Parameters<
      IdempotencyConfig['registerLambdaContext']
    >[0]);
    const call = makeIdempotent(
      async (event: { toolName: string; turnId: string; args: Record<string, unknown> }) =>
        t.run(event.args),
      { persistenceStore: layer(), config, keyPrefix: `${keyPrefix}${payload.id}` },
    );
    return {
      ...base,
      payload: payload.id,
      call: (turnId: string) => call({ toolName: payload.toolName, turnId, args: payload.args }),
      executions: t.executions,
    };
  });
}

/** A unit per payload: `read(value)` reads a value of the payload's stored-outcome size. */
function unitsFor(id: string, label: string, read: (payload: Payload) => () => Promise<unknown>) {
  return PAYLOADS.map((payload): Unit => ({ id, payload: payload.id, label, run: read(payload) }));
}

function per(calls: number, by: Map<string, number>): Record<string, number> {
  return Object.fromEntries([...by].map(([name, n]) => [name, n / calls]));
}

/** Statements per call of `op`, counted by the engine's wrapped driver (`counting`). */
function countStatements(counting: { on: boolean; statements: Map<string, number> }) {
  return async (_target: unknown, op: () => Promise<unknown>, calls: number) => {
    counting.statements.clear();
    counting.on = true;
    try {
      for (let i = 0; i < calls; i++) await op();
    } finally {
      counting.on = false;
    }
    const requests = [...counting.statements.values()].reduce((a, b) => a + b, 0) / calls;
    return { requests, executed: requests, by: per(calls, counting.statements) };
  };
}

function bump(map: Map<string, number>, name: string): void {
  map.set(name, (map.get(name) ?? 0) + 1);
}

const require = createRequire(import.meta.url);

/** The version of an installed package (`name/package.json` is not always exported). */
function versionOf(name: string): string {
  let dir = dirname(require.resolve(name));
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === name) return pkg.version ?? '?';
    } catch {
      // not here
    }
    dir = dirname(dir);
  }
  return '?';
}

// ---------------------------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------------------------

/** What the command counter needs of a connection: its address and a marker command. */
interface RedisConnection {
  addr(): Promise<string>;
  echo(text: string): Promise<unknown>;
}

function clientAddr(info: unknown): string {
  const addr = /(?:^|\s)addr=(\S+)/.exec(String(info))?.[1];
  if (addr === undefined) throw new Error(`no addr in CLIENT INFO: ${String(info)}`);
  return addr;
}

/** ioredis and iovalkey (the same API). */
function ioConnection(redis: {
  call(command: string, ...args: string[]): Promise<unknown>;
}): RedisConnection {
  return {
    addr: async () => clientAddr(await redis.call('CLIENT', 'INFO')),
    echo: (text) => redis.call('ECHO', text),
  };
}

/** node-redis (`@redis/client` 6, `redis` 4): raw commands through `sendCommand`. */
function nodeRedisConnection(redis: {
  sendCommand(args: string[]): Promise<unknown>;
}): RedisConnection {
  return {
    addr: async () => clientAddr(await redis.sendCommand(['CLIENT', 'INFO'])),
    echo: (text) => redis.sendCommand(['ECHO', text]),
  };
}

/** The `redis@4` client inside the node-idempotency adapter (a private field, read for the unit). */
interface NodeRedis4 {
  get(key: string): Promise<string | null>;
  sendCommand(args: string[]): Promise<unknown>;
}

/**
 * The hand-written baseline: one `SET key <in progress> NX GET PX ttl` claims the key or, in the
 * same command, returns what is there (Redis 7 allows `NX` with `GET`). Fresh: that SET, the
 * tool, `SET key <outcome> XX PX ttl` (2 commands). Replay: the one SET, which returns the
 * outcome (1 command). No owner token, lease, drift check or notification: the floor.
 */
function setNxGetBaseline(redis: Redis, prefix: string, payload: Payload) {
  const inProgress = '{"s":"in_progress"}';
  const t = tool(payload);
  const call = async (turnId: string): Promise<unknown> => {
    const hash = createHash('sha256').update(
      JSON.stringify([payload.toolName, turnId, payload.args]),
    );
    const key = `${prefix}${hash.digest('base64url')}`;
    const previous = await redis.set(key, inProgress, 'PX', TTL_MS, 'NX', 'GET');
    if (previous !== null) {
      if (previous === inProgress) throw new Error(`${key} is in progress`);
      return (JSON.parse(previous) as { v: unknown }).v;
    }
    let value: unknown;
    try {
      value = t.run(payload.args);
    } catch (error) {
      await redis.del(key);
      throw error;
    }
    await redis.set(key, JSON.stringify({ v: value }), 'PX', TTL_MS, 'XX');
    return value;
  };
  return { call, executions: t.executions };
}

/** Replayed keys of the cached contender all fit (and outlive the run): the best case. */
const LOCAL_CACHE = { maxEntries: 50_000, ttl: 600_000 };

export async function redisEngine(url: string): Promise<Engine> {
  const prefix = `bench:${RUN}:`;
  const connect = () => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const connectValkey = () => new Valkey(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  // One connection per contender and per unit.
  const ioOurs = connect();
  const ioCached = connect();
  const ioBaseline = connect();
  const ioUnit = connect();
  const valkeyOurs = connectValkey();
  const valkeyUnit = connectValkey();
  await Promise.all(
    [ioOurs, ioCached, ioBaseline, ioUnit, valkeyOurs, valkeyUnit].map((c) => c.connect()),
  );
  const redis6Ours = await createClient({ url }).connect();
  const redis6 = await createClient({ url }).connect();
  const redis6Unit = await createClient({ url }).connect();
  const adapter = new RedisStorageAdapter({ url });
  await adapter.connect();
  const redis4 = (adapter as unknown as { client: NodeRedis4 }).client;
  // The redis 4 unit: a second adapter, for its client of its own.
  const unitAdapter = new RedisStorageAdapter({ url });
  await unitAdapter.connect();
  const redis4Unit = (unitAdapter as unknown as { client: NodeRedis4 }).client;

  const unitKey = (payload: Payload) => `${prefix}get:${payload.id}`;
  const setUnitKeys = async () => {
    for (const payload of PAYLOADS) {
      await ioUnit.set(unitKey(payload), storedOutcome(payload), 'PX', TTL_MS);
    }
  };
  await setUnitKeys();

  // @idempotent-tools: the whole executor path over the Redis store, on each client.
  const stores = {
    ioredis: createRedisStore(ioOurs, { prefix: `${prefix}it:` }),
    nodeRedis: createRedisStore(redis6Ours, { prefix: `${prefix}itn:` }),
    iovalkey: createRedisStore(valkeyOurs, { prefix: `${prefix}itv:` }),
    cachedInner: createRedisStore(ioCached, { prefix: `${prefix}itc:` }),
  };
  const cached = withLocalCache(stores.cachedInner, LOCAL_CACHE);
  const run = (store: IdempotencyStore) => createIdempotency({ store, ttl: TTL_MS });

  // node-idempotency: onRequest, the tool, onResponse (its documented flow).
  const nodeIdempotency = new NodeIdempotency(adapter, {
    cacheKeyPrefix: `${prefix}ni`,
    cacheTTLMS: TTL_MS,
  });

  const contenders: Contender[] = [
    ...oursFor(run(stores.ioredis), {
      id: 'ours',
      label: '@idempotent-tools/store-redis (ioredis)',
      unit: 'ioredis-get',
      how: '`createIdempotency({ store: createRedisStore(ioredis) }).run(call, tool)`',
    }),
    ...oursFor(run(stores.nodeRedis), {
      id: 'ours-node-redis',
      label: '@idempotent-tools/store-redis (@redis/client 6)',
      unit: 'redis6-get',
      how: '`createRedisStore(await createClient({ url }).connect())` (node-redis driver)',
    }),
    ...oursFor(run(stores.iovalkey), {
      id: 'ours-iovalkey',
      label: '@idempotent-tools/store-redis (iovalkey)',
      unit: 'iovalkey-get',
      how: '`createRedisStore(new Redis(url))` with `Redis` from iovalkey',
    }),
    ...oursFor(run(cached), {
      id: 'ours-cached',
      label: '@idempotent-tools/store-redis (ioredis) + withLocalCache',
      unit: 'ioredis-get',
      how: `\`withLocalCache(createRedisStore(ioredis), { maxEntries: ${LOCAL_CACHE.maxEntries}, ttl: ${LOCAL_CACHE.ttl} })\`: every replayed key fits (the best case); cleared with the records between rounds`,
    }),
    ...powertoolsFor(() => new CachePersistenceLayer({ client: redis6 }), `${prefix}pt`, {
      id: 'powertools',
      label: '@aws-lambda-powertools/idempotency (cache layer, @redis/client 6)',
      unit: 'redis6-get',
      how: '`makeIdempotent(tool, { persistenceStore: new CachePersistenceLayer({ client }) })`, Lambda context registered',
    }),
    ...PAYLOADS.map((payload): Contender => {
      const t = tool(payload);
      return {
        id: 'node-idempotency',
        payload: payload.id,
        label: '@node-idempotency/core + storage-adapter-redis (redis 4)',
        unit: 'redis4-get',
        how: '`onRequest(req)`, the tool, `onResponse(req, { body })`; key = turn id, body = args',
        call: async (turnId) => {
          const req = {
            method: 'POST',
            path: `/tools/${payload.toolName}`,
            headers: { 'idempotency-key': turnId },
            body: payload.args,
          };
          const hit = await nodeIdempotency.onRequest<unknown, unknown>(req);
          if (hit !== undefined) return hit.body;
          const value = t.run(payload.args);
          await nodeIdempotency.onResponse(req, { body: value });
          return value;
        },
        executions: t.executions,
      };
    }),
    ...PAYLOADS.map((payload): Contender => {
      const baseline = setNxGetBaseline(ioBaseline, `${prefix}nx:${payload.id}:`, payload);
      return {
        id: 'baseline',
        payload: payload.id,
        label: 'hand-written `SET NX GET` (ioredis)',
        unit: 'ioredis-get',
        how: '`SET k inprogress NX GET PX ttl`; null: run, `SET k outcome XX PX ttl`; else replay the value',
        call: baseline.call,
        executions: baseline.executions,
      };
    }),
  ];
  const units: Unit[] = [
    ...unitsFor(
      'ioredis-get',
      `ioredis ${versionOf('ioredis')} GET`,
      (p) => () => ioUnit.get(unitKey(p)),
    ),
    ...unitsFor(
      'iovalkey-get',
      `iovalkey ${versionOf('iovalkey')} GET`,
      (p) => () => valkeyUnit.get(unitKey(p)),
    ),
    ...unitsFor(
      'redis6-get',
      `@redis/client ${versionOf('@redis/client')} GET`,
      (p) => () => redis6Unit.get(unitKey(p)),
    ),
    ...unitsFor('redis4-get', 'redis 4 GET', (p) => () => redis4Unit.get(unitKey(p))),
  ];
  const connections = new Map<string, RedisConnection>([
    ['ours', ioConnection(ioOurs)],
    ['ours-cached', ioConnection(ioCached)],
    ['ours-iovalkey', ioConnection(valkeyOurs)],
    ['ours-node-redis', nodeRedisConnection(redis6Ours)],
    ['baseline', ioConnection(ioBaseline)],
    ['powertools', nodeRedisConnection(redis6)],
    ['node-idempotency', nodeRedisConnection(redis4)],
    ['ioredis-get', ioConnection(ioUnit)],
    ['iovalkey-get', ioConnection(valkeyUnit)],
    ['redis6-get', nodeRedisConnection(redis6Unit)],
    ['redis4-get', nodeRedisConnection(redis4Unit)],
  ]);

  const deleteAll = async () => {
    let cursor = '0';
    do {
      const [next, keys] = await ioUnit.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await ioUnit.unlink(...keys);
    } while (cursor !== '0');
  };
  const info = await ioUnit.info('server');
  const persistence = await ioUnit.config('GET', 'appendonly');

  // MONITOR, filtered by the client's address: INFO commandstats is server-wide, and other
  // processes may use this Redis meanwhile. A script's own commands show as source `lua` right
  // after its EVALSHA (Redis runs scripts atomically).
  const count = async (target: string, op: () => Promise<unknown>, calls: number) => {
    const connection = connections.get(target);
    if (connection === undefined) throw new Error(`no connection for ${target}`);
    const addr = await connection.addr();
    const monitor = await ioUnit.monitor();
    const lines: { source: string; args: string[] }[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      lines.push({ source, args });
    });
    // On a busy server, lines still arrive while the monitor disconnects: ioredis then reports
    // a "command queue state error" on it. Only an error before the end marker counts.
    let done = false;
    let failed: unknown;
    monitor.on('error', (error: unknown) => {
      if (!done) failed ??= error;
    });
    const start = `bench-start-${randomUUID()}`;
    const end = `bench-end-${randomUUID()}`;
    const isMarker = (line: { args: string[] }, text: string) =>
      line.args[0]?.toLowerCase() === 'echo' && line.args[1] === text;
    try {
      await connection.echo(start);
      for (let i = 0; i < calls; i++) await op();
      await connection.echo(end);
      const deadline = Date.now() + 5000;
      while (!lines.some((line) => isMarker(line, end))) {
        if (failed !== undefined) throw failed;
        if (Date.now() > deadline) throw new Error('MONITOR did not see the end marker');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      done = true;
      monitor.disconnect();
    }
    const first = lines.findIndex((line) => isMarker(line, start));
    const last = lines.findIndex((line) => isMarker(line, end));
    if (first < 0) throw new Error(`MONITOR did not see the start marker of ${target}`);
    let requests = 0;
    let executed = 0;
    let ours = false;
    const by = new Map<string, number>();
    for (const line of lines.slice(first + 1, last)) {
      const name = (line.args[0] ?? '?').toUpperCase();
      if (line.source === addr) {
        ours = true;
        requests++;
        executed++;
        bump(by, name);
      } else if (line.source === 'lua') {
        if (!ours) continue;
        executed++;
        bump(by, `${name} (in script)`);
      } else {
        ours = false;
      }
    }
    return { requests: requests / calls, executed: executed / calls, by: per(calls, by) };
  };

  return {
    id: 'redis',
    title: 'Redis',
    version: `Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'}`,
    settings: `appendonly ${String(persistence[1] ?? '?')}, loopback TCP; a connection per contender and per unit; client defaults (ioredis / iovalkey: no auto-pipelining)`,
    requestName: 'command',
    units,
    contenders,
    count,
    serverCpu: async () => {
      const cpu = await ioUnit.info('cpu');
      const seconds = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(cpu)?.[1]);
      return seconds('used_cpu_user') + seconds('used_cpu_sys');
    },
    clear: async () => {
      await deleteAll();
      cached.localCache.clear();
      await setUnitKeys();
    },
    close: async () => {
      for (const store of Object.values(stores)) await store.close();
      await deleteAll();
      for (const c of [ioOurs, ioCached, ioBaseline, ioUnit, valkeyOurs, valkeyUnit]) {
        c.disconnect();
      }
      for (const c of [redis6Ours, redis6, redis6Unit]) c.destroy();
      await adapter.disconnect();
      await unitAdapter.disconnect();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------------------------

/** First word of a statement, or its prepared name. */
function statementName(config: unknown): string {
  if (typeof config === 'string') return config.trimStart().split(/\s/, 1)[0]!.toUpperCase();
  const { name, text } = config as { name?: string; text?: string };
  return name ?? statementName(text ?? '?');
}

export async function postgresEngine(url: string): Promise<Engine> {
  // The store is imported here: it may not be built yet (then the bench reports it pending).
  const { createPostgresStore } = await import('@idempotent-tools/store-postgres');
  const counting = { on: false, statements: new Map<string, number>() };

  // pg: ours, the baseline and the pg unit share one pool.
  const pool = new Pool({ connectionString: url, max: 10 });
  pool.on('error', () => {
    // An idle client died; the pool replaces it.
  });
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as unknown as { query: typeof query }).query = (...args: unknown[]) => {
    if (counting.on) bump(counting.statements, statementName(args[0]));
    return query(...args);
  };

  // postgres.js: its own instance (ours and its unit).
  const sql = postgres(url, { max: 10, onnotice: () => {} });
  const unsafe = sql.unsafe.bind(sql);
  sql.unsafe = ((...args: Parameters<typeof sql.unsafe>) => {
    if (counting.on) bump(counting.statements, statementName(args[0]));
    return unsafe(...args);
  }) as typeof sql.unsafe;

  // PGlite: one in-process PostgreSQL session (in memory): ours and its unit.
  const lite = new PGlite();
  await lite.waitReady;
  const liteQuery = lite.query.bind(lite);
  lite.query = ((...args: Parameters<typeof lite.query>) => {
    if (counting.on) bump(counting.statements, statementName(args[0]));
    return liteQuery(...args);
  }) as typeof lite.query;

  const tables = {
    pg: `bench_${RUN}_store`,
    postgresJs: `bench_${RUN}_store_pgjs`,
    baseline: `bench_${RUN}_baseline`,
  };
  const stores = {
    pg: createPostgresStore(pool, { table: tables.pg }),
    postgresJs: createPostgresStore(sql, { table: tables.postgresJs }),
    pglite: createPostgresStore(lite, { table: 'bench_store' }),
  };
  for (const store of Object.values(stores)) await store.ensureSchema();
  const run = (store: IdempotencyStore) => createIdempotency({ store, ttl: TTL_MS });

  await pool.query(
    `CREATE TABLE ${tables.baseline} (key text PRIMARY KEY, state text NOT NULL, outcome text, expires_at bigint NOT NULL)`,
  );
  await lite.exec('CREATE TABLE bench_unit (key text PRIMARY KEY, outcome text NOT NULL)');
  const unitKey = (payload: Payload) => `unit-${payload.id}`;
  for (const payload of PAYLOADS) {
    await pool.query(
      `INSERT INTO ${tables.baseline} (key, state, outcome, expires_at) VALUES ($1, 'completed', $2, 0)`,
      [unitKey(payload), storedOutcome(payload)],
    );
    await lite.query('INSERT INTO bench_unit (key, outcome) VALUES ($1, $2)', [
      unitKey(payload),
      storedOutcome(payload),
    ]);
  }
  const claimSql = {
    name: `bench_${RUN}_claim`,
    text: `INSERT INTO ${tables.baseline} (key, state, expires_at) VALUES ($1, 'in_progress', $2) ON CONFLICT (key) DO NOTHING RETURNING key`,
  };
  const readSql = {
    name: `bench_${RUN}_read`,
    text: `SELECT state, outcome FROM ${tables.baseline} WHERE key = $1`,
  };
  const completeSql = {
    name: `bench_${RUN}_complete`,
    text: `UPDATE ${tables.baseline} SET state = 'completed', outcome = $2 WHERE key = $1`,
  };
  const unitText = `SELECT outcome FROM ${tables.baseline} WHERE key = $1`;
  const unitSql = { name: `bench_${RUN}_unit`, text: unitText };
  const baseline = (payload: Payload) => {
    const base = tool(payload);
    const call = async (turnId: string): Promise<unknown> => {
      const key = createHash('sha256')
        .update(JSON.stringify([payload.toolName, turnId, payload.args]))
        .digest('base64url');
      const claimed = await pool.query({ ...claimSql, values: [key, Date.now() + TTL_MS] });
      if (claimed.rowCount === 0) {
        const { rows } = await pool.query<{ state: string; outcome: string | null }>({
          ...readSql,
          values: [key],
        });
        const row = rows[0];
        if (row === undefined || row.state !== 'completed' || row.outcome === null) {
          throw new Error(`${key} is in progress`);
        }
        return (JSON.parse(row.outcome) as { v: unknown }).v;
      }
      const value = base.run(payload.args);
      await pool.query({ ...completeSql, values: [key, JSON.stringify({ v: value })] });
      return value;
    };
    return { call, executions: base.executions };
  };

  const settings = await pool.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'server_version') ORDER BY name`,
  );
  const setting = (name: string) => settings.rows.find((row) => row.name === name)?.setting ?? '?';
  const liteVersion =
    (await liteQuery<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ??
    '?';

  return {
    id: 'postgres',
    title: 'PostgreSQL',
    version: `PostgreSQL ${setting('server_version')}; PGlite ${versionOf('@electric-sql/pglite')} (PostgreSQL ${liteVersion}, WebAssembly, in memory)`,
    settings: `fsync ${setting('fsync')}, synchronous_commit ${setting('synchronous_commit')}; pg.Pool max 10 (shared by ours on pg, the baseline and the pg unit), postgres.js ${versionOf('postgres')} max 10 (ours on it and its unit), loopback TCP; PGlite in this process, one session (ours on it and its unit)`,
    requestName: 'statement',
    units: [
      ...unitsFor(
        'pg-select',
        'pg prepared `SELECT outcome ... WHERE key = $1`',
        (p) => () => pool.query({ ...unitSql, values: [unitKey(p)] }),
      ),
      ...unitsFor(
        'postgresjs-select',
        'postgres.js prepared `SELECT outcome ... WHERE key = $1`',
        (p) => () => sql.unsafe(unitText, [unitKey(p)], { prepare: true }),
      ),
      ...unitsFor(
        'pglite-select',
        'PGlite `SELECT outcome ... WHERE key = $1`',
        (p) => () => lite.query('SELECT outcome FROM bench_unit WHERE key = $1', [unitKey(p)]),
      ),
    ],
    contenders: [
      ...oursFor(run(stores.pg), {
        id: 'ours',
        label: '@idempotent-tools/store-postgres (pg)',
        unit: 'pg-select',
        how: '`createIdempotency({ store: createPostgresStore(pool) }).run(call, tool)`',
      }),
      ...oursFor(run(stores.postgresJs), {
        id: 'ours-postgresjs',
        label: '@idempotent-tools/store-postgres (postgres.js)',
        unit: 'postgresjs-select',
        how: '`createPostgresStore(postgres(url, { max: 10 }))`',
      }),
      ...oursFor(run(stores.pglite), {
        id: 'ours-pglite',
        label: '@idempotent-tools/store-postgres (PGlite)',
        unit: 'pglite-select',
        how: '`createPostgresStore(new PGlite())` (in memory, in this process)',
      }),
      ...PAYLOADS.map((payload): Contender => {
        const b = baseline(payload);
        return {
          id: 'baseline',
          payload: payload.id,
          label: 'hand-written `INSERT ON CONFLICT DO NOTHING` + `UPDATE` (pg)',
          unit: 'pg-select',
          how: '`INSERT ... ON CONFLICT DO NOTHING RETURNING key`; a row: run, `UPDATE`; none: `SELECT` the outcome',
          call: b.call,
          executions: b.executions,
        };
      }),
    ],
    count: countStatements(counting),
    close: async () => {
      for (const store of Object.values(stores)) await store.close();
      await query(`DROP TABLE IF EXISTS ${tables.pg}, ${tables.postgresJs}, ${tables.baseline}`);
      await sql.end({ timeout: 5 });
      await lite.close();
      await pool.end();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// SQLite
// ---------------------------------------------------------------------------------------------

export async function sqliteEngine(): Promise<Engine> {
  const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-bench-'));
  const db = new DatabaseSync(join(dir, 'bench.db'));
  // Count every run of a statement prepared on this connection (the store's and the baseline's).
  const counting = { on: false, statements: new Map<string, number>() };
  const prepare = db.prepare.bind(db);
  db.prepare = (sql: string): StatementSync => {
    const statement = prepare(sql);
    const name = statementName(sql);
    for (const method of ['run', 'get', 'all'] as const) {
      const original = statement[method].bind(statement) as (...params: unknown[]) => unknown;
      (statement as unknown as Record<string, unknown>)[method] = (...params: unknown[]) => {
        if (counting.on) bump(counting.statements, name);
        return original(...params);
      };
    }
    return statement;
  };

  // The store sets WAL, synchronous = NORMAL and busy_timeout on the connection: the baseline
  // shares it (and so its settings).
  const store = createSqliteStore(db, { table: 'bench_store' });
  const idempotency = createIdempotency({ store, ttl: TTL_MS });

  db.exec(
    'CREATE TABLE bench_baseline (key TEXT PRIMARY KEY, state TEXT NOT NULL, outcome TEXT, expires_at INTEGER NOT NULL)',
  );
  const unitKey = (payload: Payload) => `unit-${payload.id}`;
  const insertUnit = db.prepare(
    `INSERT INTO bench_baseline (key, state, outcome, expires_at) VALUES (?, 'completed', ?, 0)`,
  );
  for (const payload of PAYLOADS) insertUnit.run(unitKey(payload), storedOutcome(payload));
  const claim = db.prepare(
    `INSERT INTO bench_baseline (key, state, expires_at) VALUES (?, 'in_progress', ?) ON CONFLICT (key) DO NOTHING RETURNING key`,
  );
  const read = db.prepare('SELECT state, outcome FROM bench_baseline WHERE key = ?');
  const complete = db.prepare(
    `UPDATE bench_baseline SET state = 'completed', outcome = ? WHERE key = ?`,
  );
  const unit = db.prepare('SELECT outcome FROM bench_baseline WHERE key = ?');
  const baseline = (payload: Payload) => {
    const base = tool(payload);
    const call = async (turnId: string): Promise<unknown> => {
      const key = createHash('sha256')
        .update(JSON.stringify([payload.toolName, turnId, payload.args]))
        .digest('base64url');
      if (claim.get(key, Date.now() + TTL_MS) === undefined) {
        const row = read.get(key) as { state: string; outcome: string | null } | undefined;
        if (row === undefined || row.state !== 'completed' || row.outcome === null) {
          throw new Error(`${key} is in progress`);
        }
        return (JSON.parse(row.outcome) as { v: unknown }).v;
      }
      const value = base.run(payload.args);
      complete.run(JSON.stringify({ v: value }), key);
      return value;
    };
    return { call, executions: base.executions };
  };

  const pragma = (name: string) =>
    String(Object.values(db.prepare(`PRAGMA ${name}`).get() ?? {})[0]);
  const synchronous = ['OFF', 'NORMAL', 'FULL', 'EXTRA'][Number(pragma('synchronous'))] ?? '?';
  const version = String(Object.values(db.prepare('SELECT sqlite_version()').get() ?? {})[0]);

  return {
    id: 'sqlite',
    title: 'SQLite',
    version: `SQLite ${version} (node:sqlite)`,
    settings: `journal_mode ${pragma('journal_mode')}, synchronous ${synchronous}, a temp file; one connection shared by both contenders`,
    requestName: 'statement',
    units: unitsFor('sqlite-select', 'prepared `SELECT outcome ... WHERE key = ?`', (p) => {
      const key = unitKey(p);
      return async () => unit.get(key);
    }),
    contenders: [
      ...oursFor(idempotency, {
        id: 'ours',
        label: '@idempotent-tools/store-sqlite (node:sqlite)',
        unit: 'sqlite-select',
        how: '`createIdempotency({ store: createSqliteStore(db) }).run(call, tool)`',
      }),
      ...PAYLOADS.map((payload): Contender => {
        const b = baseline(payload);
        return {
          id: 'baseline',
          payload: payload.id,
          label: 'hand-written `INSERT ON CONFLICT DO NOTHING` + `UPDATE` (node:sqlite)',
          unit: 'sqlite-select',
          how: '`INSERT ... ON CONFLICT DO NOTHING RETURNING key`; a row: run, `UPDATE`; none: `SELECT` the outcome',
          call: b.call,
          executions: b.executions,
        };
      }),
    ],
    count: countStatements(counting),
    close: async () => {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// DynamoDB (dynalite)
// ---------------------------------------------------------------------------------------------

/**
 * dynalite (DynamoDB's API in Node on LevelDB, in memory) on 127.0.0.1 in a child process of
 * its own, so that its CPU is not the bench's (as packages/store-dynamodb's tests start it, but
 * out of process).
 */
async function startDynalite(): Promise<{ endpoint: string; child: ChildProcess }> {
  const script = `const dynalite = require(process.argv[1]);
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n'));`;
  const child = spawn(process.execPath, ['-e', script, require.resolve('dynalite')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('dynalite did not start in 20 s')), 20_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`dynalite exited (${String(code)})`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n')[0];
      if (out.includes('\n') && line !== undefined) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { port: number }).port);
      }
    });
  });
  return { endpoint: `http://127.0.0.1:${port}`, child };
}

/** CPU seconds (user + system) of a process, from /proc (Linux; undefined elsewhere). */
function processCpu(pid: number | undefined): (() => Promise<number>) | undefined {
  if (pid === undefined || process.platform !== 'linux') return undefined;
  let ticks = 100;
  try {
    ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    // the usual value
  }
  return async () => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat(5) (utime, stime): 12 and 13 after the command.
    return (Number(fields[11]) + Number(fields[12])) / ticks;
  };
}

export async function dynamodbEngine(): Promise<Engine> {
  const { createDynamoDbStore, ensureTable } = await import('@idempotent-tools/store-dynamodb');
  const { endpoint, child } = await startDynalite();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const counting = { on: false, statements: new Map<string, number>() };
  const clients: DynamoDBClient[] = [];
  /** A client of its own (for each contender and the unit), its requests counted. */
  const newClient = () => {
    const client = new DynamoDBClient({
      endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
      maxAttempts: 2,
    });
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (counting.on) {
          bump(counting.statements, String(context.commandName ?? '?').replace(/Command$/, ''));
        }
        return next(args);
      },
      { step: 'initialize', name: 'benchCount' },
    );
    clients.push(client);
    return client;
  };
  const admin = newClient();
  const tables = {
    ours: `bench-${RUN}-store`,
    powertools: `bench-${RUN}-powertools`,
    unit: `bench-${RUN}-unit`,
  };
  for (const table of Object.values(tables)) await ensureTable(admin, table);
  const unitKey = (payload: Payload) => `unit-${payload.id}`;
  for (const payload of PAYLOADS) {
    await admin.send(
      new PutItemCommand({
        TableName: tables.unit,
        Item: { id: { S: unitKey(payload) }, v: { S: storedOutcome(payload) } },
      }),
    );
  }
  const unitClient = newClient();
  const store = createDynamoDbStore({ client: newClient(), tableName: tables.ours });
  const powertoolsClient = newClient();
  const serverCpu = processCpu(child.pid);

  return {
    id: 'dynamodb',
    title: 'DynamoDB (dynalite)',
    version: `dynalite ${versionOf('dynalite')} (not DynamoDB), @aws-sdk/client-dynamodb ${versionOf('@aws-sdk/client-dynamodb')}`,
    settings:
      'dynalite in memory in a child process, loopback HTTP; a DynamoDBClient per contender and for the unit; dynalite leaves the item out of a failed condition (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), so both libraries follow it with a consistent GetItem (a replay is 1 request on DynamoDB)',
    requestName: 'request',
    units: unitsFor('dynamodb-get', 'GetItem (ConsistentRead)', (p) => {
      const input = {
        TableName: tables.unit,
        Key: { id: { S: unitKey(p) } },
        ConsistentRead: true,
      };
      return () => unitClient.send(new GetItemCommand(input));
    }),
    contenders: [
      ...oursFor(createIdempotency({ store, ttl: TTL_MS }), {
        id: 'ours',
        label: '@idempotent-tools/store-dynamodb',
        unit: 'dynamodb-get',
        how: '`createIdempotency({ store: createDynamoDbStore({ client, tableName }) }).run(call, tool)`',
      }),
      ...powertoolsFor(
        () =>
          new DynamoDBPersistenceLayer({
            tableName: tables.powertools,
            awsSdkV3Client: powertoolsClient,
          }),
        'pt',
        {
          id: 'powertools',
          label: '@aws-lambda-powertools/idempotency (DynamoDBPersistenceLayer)',
          unit: 'dynamodb-get',
          how: '`makeIdempotent(tool, { persistenceStore: new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client }) })`, Lambda context registered',
        },
      ),
    ],
    count: countStatements(counting),
    ...(serverCpu === undefined ? {} : { serverCpu }),
    close: async () => {
      await store.close();
      for (const table of Object.values(tables)) {
        await admin.send(new DeleteTableCommand({ TableName: table })).catch(() => {});
      }
      for (const client of clients) client.destroy();
      child.kill();
      await exited;
    },
  };
}
