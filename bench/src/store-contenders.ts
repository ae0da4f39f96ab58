/**
 * The contenders of the store bench (`stores.ts`), one engine at a time: Redis, PostgreSQL and
 * SQLite. Every contender makes the same tool call idempotent with its library's documented
 * usage; every engine can count the requests (Redis commands, SQL statements) a call costs.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createIdempotency } from '@idempotent-tools/core';
import { createRedisStore } from '@idempotent-tools/store-redis';
import { createSqliteStore } from '@idempotent-tools/store-sqlite';
import { Idempotency as NodeIdempotency } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { createClient } from '@redis/client';
import { Redis } from 'ioredis';
import { Pool } from 'pg';

/** The bench's records: 1 h everywhere (Powertools' default), deleted at the end of the run. */
export const TTL_MS = 3_600_000;
/** Keys, tables and prefixes of this run. */
export const RUN = randomUUID().slice(0, 8);

/** The tool every contender makes idempotent: a create-ticket call with ~120 B of arguments. */
export const TOOL = 'create_ticket';
export const ARGS = {
  title: 'Printer on floor 3 is out of toner',
  priority: 'high',
  queue: 'it-support',
  requester: 'u_8f3a91d2',
};
type Args = typeof ARGS;
export const RESULT = { ticketId: 'T-1042', status: 'created', queue: 'it-support' };
type Result = typeof RESULT;

/** A trivial tool that counts its runs (to check that a fresh call runs it, a replay not). */
function tool(): { run: (args: Args) => Result; executions: () => number } {
  let runs = 0;
  return {
    run: (args) => {
      runs++;
      return { ticketId: RESULT.ticketId, status: RESULT.status, queue: args.queue };
    },
    executions: () => runs,
  };
}

export interface Contender {
  readonly id: string;
  readonly label: string;
  /** Id of the unit (a bare read through the same client library) its latency is divided by. */
  readonly unit: string;
  /** `@idempotent-tools`' own store: the one with targets. */
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
  readonly id: 'redis' | 'postgres' | 'sqlite';
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
  /** Count the requests of `calls` sequential runs of `op` on behalf of `target`. */
  count(target: string, op: () => Promise<unknown>, calls: number): Promise<Counted>;
  /** Delete the bench's keys / tables, close every connection. */
  close(): Promise<void>;
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

function ioConnection(redis: Redis): RedisConnection {
  return {
    addr: async () => clientAddr(await redis.client('INFO')),
    echo: (text) => redis.echo(text),
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
function setNxGetBaseline(redis: Redis, prefix: string) {
  const inProgress = '{"s":"in_progress"}';
  const t = tool();
  const call = async (turnId: string): Promise<unknown> => {
    const hash = createHash('sha256').update(JSON.stringify([TOOL, turnId, ARGS]));
    const key = `${prefix}${hash.digest('base64url')}`;
    const previous = await redis.set(key, inProgress, 'PX', TTL_MS, 'NX', 'GET');
    if (previous !== null) {
      if (previous === inProgress) throw new Error(`${key} is in progress`);
      return (JSON.parse(previous) as { v: unknown }).v;
    }
    let value: Result;
    try {
      value = t.run(ARGS);
    } catch (error) {
      await redis.del(key);
      throw error;
    }
    await redis.set(key, JSON.stringify({ v: value }), 'PX', TTL_MS, 'XX');
    return value;
  };
  return { call, executions: t.executions };
}

export async function redisEngine(url: string): Promise<Engine> {
  const prefix = `bench:${RUN}:`;
  const connect = () => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  const ioOurs = connect();
  const ioBaseline = connect();
  const ioUnit = connect();
  await Promise.all([ioOurs.connect(), ioBaseline.connect(), ioUnit.connect()]);
  const redis6 = await createClient({ url }).connect();
  const adapter = new RedisStorageAdapter({ url });
  await adapter.connect();
  const redis4 = (adapter as unknown as { client: NodeRedis4 }).client;

  const unitKey = `${prefix}get`;
  await ioUnit.set(unitKey, JSON.stringify({ v: RESULT }), 'PX', TTL_MS);

  // @idempotent-tools: the whole executor path over the Redis store.
  const ours = tool();
  const store = createRedisStore(ioOurs, { prefix: `${prefix}it:` });
  const idempotency = createIdempotency({ store, ttl: TTL_MS });

  // Powertools: makeIdempotent over the cache persistence layer and @redis/client.
  const powertools = tool();
  const config = new IdempotencyConfig({ expiresAfterSeconds: TTL_MS / 1000 });
  // Outside Lambda: without a remaining time, an in-progress record never expires its lock and
  // concurrent duplicates both run (the note).
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 } as Parameters<
    IdempotencyConfig['registerLambdaContext']
  >[0]);
  const powertoolsCall = makeIdempotent(
    async (payload: { toolName: string; turnId: string; args: Args }) =>
      powertools.run(payload.args),
    {
      persistenceStore: new CachePersistenceLayer({ client: redis6 }),
      config,
      keyPrefix: `${prefix}pt`,
    },
  );

  // node-idempotency: onRequest, the tool, onResponse (its documented flow).
  const nodeIdem = tool();
  const nodeIdempotency = new NodeIdempotency(adapter, {
    cacheKeyPrefix: `${prefix}ni`,
    cacheTTLMS: TTL_MS,
  });

  const baseline = setNxGetBaseline(ioBaseline, `${prefix}nx:`);

  const contenders: Contender[] = [
    {
      id: 'ours',
      label: '@idempotent-tools/store-redis (ioredis)',
      unit: 'ioredis-get',
      ours: true,
      how: '`createIdempotency({ store: createRedisStore(ioredis) }).run(call, tool)`',
      call: async (turnId) =>
        (await idempotency.run({ toolName: TOOL, turnId, args: ARGS }, ours.run)).value,
      executions: ours.executions,
    },
    {
      id: 'powertools',
      label: '@aws-lambda-powertools/idempotency (cache layer, @redis/client 6)',
      unit: 'redis6-get',
      how: '`makeIdempotent(tool, { persistenceStore: new CachePersistenceLayer({ client }) })`, Lambda context registered',
      call: (turnId) => powertoolsCall({ toolName: TOOL, turnId, args: ARGS }),
      executions: powertools.executions,
    },
    {
      id: 'node-idempotency',
      label: '@node-idempotency/core + storage-adapter-redis (redis 4)',
      unit: 'redis4-get',
      how: '`onRequest(req)`, the tool, `onResponse(req, { body })`; key = turn id, body = args',
      call: async (turnId) => {
        const req = {
          method: 'POST',
          path: `/tools/${TOOL}`,
          headers: { 'idempotency-key': turnId },
          body: ARGS,
        };
        const cached = await nodeIdempotency.onRequest<Result, unknown>(req);
        if (cached !== undefined) return cached.body;
        const value = nodeIdem.run(ARGS);
        await nodeIdempotency.onResponse(req, { body: value });
        return value;
      },
      executions: nodeIdem.executions,
    },
    {
      id: 'baseline',
      label: 'hand-written `SET NX GET` (ioredis)',
      unit: 'ioredis-get',
      how: '`SET k inprogress NX GET PX ttl`; null: run, `SET k outcome XX PX ttl`; else replay the value',
      call: baseline.call,
      executions: baseline.executions,
    },
  ];
  const units: Unit[] = [
    { id: 'ioredis-get', label: 'ioredis 6 GET', run: () => ioUnit.get(unitKey) },
    { id: 'redis6-get', label: '@redis/client 6 GET', run: () => redis6.get(unitKey) },
    { id: 'redis4-get', label: 'redis 4 GET', run: () => redis4.get(unitKey) },
  ];
  const connections = new Map<string, RedisConnection>([
    ['ours', ioConnection(ioOurs)],
    ['baseline', ioConnection(ioBaseline)],
    ['ioredis-get', ioConnection(ioUnit)],
    [
      'powertools',
      {
        addr: async () => clientAddr(await redis6.sendCommand(['CLIENT', 'INFO'])),
        echo: (text) => redis6.sendCommand(['ECHO', text]),
      },
    ],
    [
      'node-idempotency',
      {
        addr: async () => clientAddr(await redis4.sendCommand(['CLIENT', 'INFO'])),
        echo: (text) => redis4.sendCommand(['ECHO', text]),
      },
    ],
  ]);
  connections.set('redis6-get', connections.get('powertools')!);
  connections.set('redis4-get', connections.get('node-idempotency')!);

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
        if (Date.now() > deadline) throw new Error('MONITOR did not see the end marker');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      monitor.disconnect();
    }
    const first = lines.findIndex((line) => isMarker(line, start));
    const last = lines.findIndex((line) => isMarker(line, end));
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
    settings: `appendonly ${String(persistence[1] ?? '?')}, loopback TCP; client defaults (ioredis: no auto-pipelining)`,
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
      await ioUnit.set(unitKey, JSON.stringify({ v: RESULT }), 'PX', TTL_MS);
    },
    close: async () => {
      await store.close();
      await deleteAll();
      ioOurs.disconnect();
      ioBaseline.disconnect();
      ioUnit.disconnect();
      redis6.destroy();
      await adapter.disconnect();
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
  const pool = new Pool({ connectionString: url, max: 10 });
  pool.on('error', () => {
    // An idle client died; the pool replaces it.
  });
  const counting = { on: false, statements: new Map<string, number>() };
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
  (pool as unknown as { query: typeof query }).query = (...args: unknown[]) => {
    if (counting.on) bump(counting.statements, statementName(args[0]));
    return query(...args);
  };

  const oursTable = `bench_${RUN}_store`;
  const baseTable = `bench_${RUN}_baseline`;
  const store = createPostgresStore(pool, { table: oursTable });
  await store.ensureSchema();
  const ours = tool();
  const idempotency = createIdempotency({ store, ttl: TTL_MS });

  await pool.query(
    `CREATE TABLE ${baseTable} (key text PRIMARY KEY, state text NOT NULL, outcome text, expires_at bigint NOT NULL)`,
  );
  const unitKey = 'unit';
  await pool.query(
    `INSERT INTO ${baseTable} (key, state, outcome, expires_at) VALUES ($1, 'completed', $2, 0)`,
    [unitKey, JSON.stringify({ v: RESULT })],
  );
  const base = tool();
  const claimSql = {
    name: `bench_${RUN}_claim`,
    text: `INSERT INTO ${baseTable} (key, state, expires_at) VALUES ($1, 'in_progress', $2) ON CONFLICT (key) DO NOTHING RETURNING key`,
  };
  const readSql = {
    name: `bench_${RUN}_read`,
    text: `SELECT state, outcome FROM ${baseTable} WHERE key = $1`,
  };
  const completeSql = {
    name: `bench_${RUN}_complete`,
    text: `UPDATE ${baseTable} SET state = 'completed', outcome = $2 WHERE key = $1`,
  };
  const unitSql = {
    name: `bench_${RUN}_unit`,
    text: `SELECT outcome FROM ${baseTable} WHERE key = $1`,
  };
  const baseline = async (turnId: string): Promise<unknown> => {
    const key = createHash('sha256')
      .update(JSON.stringify([TOOL, turnId, ARGS]))
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
    const value = base.run(ARGS);
    await pool.query({ ...completeSql, values: [key, JSON.stringify({ v: value })] });
    return value;
  };

  const settings = await pool.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'server_version') ORDER BY name`,
  );
  const setting = (name: string) => settings.rows.find((row) => row.name === name)?.setting ?? '?';

  return {
    id: 'postgres',
    title: 'PostgreSQL',
    version: `PostgreSQL ${setting('server_version')}`,
    settings: `fsync ${setting('fsync')}, synchronous_commit ${setting('synchronous_commit')}; pg.Pool max 10 (shared by both contenders and the unit), loopback TCP`,
    requestName: 'statement',
    units: [
      {
        id: 'pg-select',
        label: 'pg prepared `SELECT outcome ... WHERE key = $1`',
        run: () => pool.query({ ...unitSql, values: [unitKey] }),
      },
    ],
    contenders: [
      {
        id: 'ours',
        label: '@idempotent-tools/store-postgres (pg)',
        unit: 'pg-select',
        ours: true,
        how: '`createIdempotency({ store: createPostgresStore(pool) }).run(call, tool)`',
        call: async (turnId) =>
          (await idempotency.run({ toolName: TOOL, turnId, args: ARGS }, ours.run)).value,
        executions: ours.executions,
      },
      {
        id: 'baseline',
        label: 'hand-written `INSERT ON CONFLICT DO NOTHING` + `UPDATE` (pg)',
        unit: 'pg-select',
        how: '`INSERT ... ON CONFLICT DO NOTHING RETURNING key`; a row: run, `UPDATE`; none: `SELECT` the outcome',
        call: baseline,
        executions: base.executions,
      },
    ],
    count: countStatements(counting),
    close: async () => {
      await store.close();
      await query(`DROP TABLE IF EXISTS ${oursTable}, ${baseTable}`);
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
  const ours = tool();
  const idempotency = createIdempotency({ store, ttl: TTL_MS });

  db.exec(
    'CREATE TABLE bench_baseline (key TEXT PRIMARY KEY, state TEXT NOT NULL, outcome TEXT, expires_at INTEGER NOT NULL)',
  );
  const unitKey = 'unit';
  db.prepare(
    `INSERT INTO bench_baseline (key, state, outcome, expires_at) VALUES (?, 'completed', ?, 0)`,
  ).run(unitKey, JSON.stringify({ v: RESULT }));
  const claim = db.prepare(
    `INSERT INTO bench_baseline (key, state, expires_at) VALUES (?, 'in_progress', ?) ON CONFLICT (key) DO NOTHING RETURNING key`,
  );
  const read = db.prepare('SELECT state, outcome FROM bench_baseline WHERE key = ?');
  const complete = db.prepare(
    `UPDATE bench_baseline SET state = 'completed', outcome = ? WHERE key = ?`,
  );
  const unit = db.prepare('SELECT outcome FROM bench_baseline WHERE key = ?');
  const base = tool();
  const baseline = async (turnId: string): Promise<unknown> => {
    const key = createHash('sha256')
      .update(JSON.stringify([TOOL, turnId, ARGS]))
      .digest('base64url');
    if (claim.get(key, Date.now() + TTL_MS) === undefined) {
      const row = read.get(key) as { state: string; outcome: string | null } | undefined;
      if (row === undefined || row.state !== 'completed' || row.outcome === null) {
        throw new Error(`${key} is in progress`);
      }
      return (JSON.parse(row.outcome) as { v: unknown }).v;
    }
    const value = base.run(ARGS);
    complete.run(JSON.stringify({ v: value }), key);
    return value;
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
    units: [
      {
        id: 'sqlite-select',
        label: 'prepared `SELECT outcome ... WHERE key = ?`',
        run: async () => unit.get(unitKey),
      },
    ],
    contenders: [
      {
        id: 'ours',
        label: '@idempotent-tools/store-sqlite (node:sqlite)',
        unit: 'sqlite-select',
        ours: true,
        how: '`createIdempotency({ store: createSqliteStore(db) }).run(call, tool)`',
        call: async (turnId) =>
          (await idempotency.run({ toolName: TOOL, turnId, args: ARGS }, ours.run)).value,
        executions: ours.executions,
      },
      {
        id: 'baseline',
        label: 'hand-written `INSERT ON CONFLICT DO NOTHING` + `UPDATE` (node:sqlite)',
        unit: 'sqlite-select',
        how: '`INSERT ... ON CONFLICT DO NOTHING RETURNING key`; a row: run, `UPDATE`; none: `SELECT` the outcome',
        call: baseline,
        executions: base.executions,
      },
    ],
    count: countStatements(counting),
    close: async () => {
      await store.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
