/**
 * The engines under test, started by the harness itself on 127.0.0.1 in a temp dir, and the
 * faults each one can take:
 *
 * - SQLite: a file. Outage: another process holds an exclusive lock (writers wait, then fail
 *   past the busy timeout). Clock: the workers' (the store runs on the client's clock).
 * - Redis: `appendonly yes`, `appendfsync always`. Restart: kill -9 and start on the same AOF.
 *   Outage: SIGSTOP of the server. Clock: its own, shifted by a preload (see `timeshift.c`:
 *   libfaketime 0.9.10 cannot start a jemalloc-linked redis-server, libfaketime issue #130).
 * - Redis Cluster: 3 masters, each with its own AOF. Restart: kill -9 one master and start it on
 *   its AOF and nodes.conf. Outage: SIGSTOP one master. Clock: every master's, stepped together.
 * - PostgreSQL: `initdb` on a temp dir, run under libfaketime (`FAKETIME_TIMESTAMP_FILE`, re-read
 *   on every call: `FAKETIME_NO_CACHE=1`; monotonic clocks left alone). Restart: immediate
 *   shutdown (SIGQUIT, WAL recovery on start). Outage: SIGSTOP of the postmaster and every backend.
 * - PGlite: one process only (WASM PostgreSQL in the worker, on a data dir): one worker, killed
 *   and started again on the data dir (recovery); its clock is the worker's `Date.now`.
 * - DynamoDB: dynalite (in-memory DynamoDB in Node) in a process of its own, as
 *   packages/store-dynamodb/src/test-utils/engine.ts starts it. No restart (it keeps nothing);
 *   outage: SIGSTOP of its process. Clock: the workers'.
 *
 * Modelled on packages/store-redis/src/test-utils (redis-server.ts, redis-cluster.ts) and
 * packages/store-postgres/src/test-utils/throwaway-postgres.ts.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Random } from './random.ts';
import type { FaultKind, StoreConfig, Target } from './types.ts';

const exec = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

export interface Engine {
  target: Target;
  /** How the harness (and the checker) open the store: directly. */
  config: StoreConfig;
  describe: string;
  /** The TCP endpoints workers reach through a proxy (none: no proxy faults). */
  endpoints: { host: string; port: number }[];
  /** The store config of a worker whose connections go through `proxied` (endpoint -> port). */
  workerConfig(proxied: { host: string; port: number }[] | undefined): StoreConfig;
  /** The fault kinds this engine takes (kill, stop, vendor: every one with >= 2 workers). */
  faults: ReadonlySet<FaultKind>;
  /** The clock a `clock` fault steps: the engine's own, or the workers'. */
  clock: 'store' | 'workers';
  /** One worker process at most (PGlite). */
  singleProcess: boolean;
  restart?: (random: Random) => Promise<string>;
  /** Make the store unreachable for `ms`, then bring it back; resolves once back. */
  outage?: (ms: number, random: Random) => Promise<string>;
  /** Step the engine's own clock to `offsetMs` from the real one. */
  setClock?: (offsetMs: number) => void;
  /** Run once before the workers start (schema, table). */
  prepare?: () => Promise<void>;
  stop(): Promise<void>;
}

/** Every child an engine started, killed if the harness exits without stopping them. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) {
    try {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    } catch {
      // gone
    }
  }
});

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** `count` free loopback ports (with `bus`, port + 10000 free too), drawn from 20000-29999. */
async function freePorts(count: number, bus = false): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 1000; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (ports.includes(port) || !(await portFree(port))) continue;
    if (bus && !(await portFree(port + 10_000))) continue;
    ports.push(port);
  }
  if (ports.length < count) throw new Error(`found only ${ports.length} free ports of ${count}`);
  return ports;
}

interface Child {
  process: ChildProcess;
  exited: Promise<void>;
  output(): string;
}

function spawnChild(command: string, args: string[], env?: NodeJS.ProcessEnv): Child {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(env === undefined ? {} : { env: { ...process.env, ...env } }),
  });
  live.add(child);
  let output = '';
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      live.delete(child);
      resolve();
    });
    child.once('error', () => {
      live.delete(child);
      resolve();
    });
  });
  return { process: child, exited, output: () => output };
}

async function killChild(child: Child, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.process.exitCode === null && child.process.signalCode === null) {
    child.process.kill('SIGCONT');
    child.process.kill(signal);
  }
  await child.exited;
}

/** Stop `pids` for `ms` (SIGSTOP), then continue them. */
async function freeze(pids: number[], ms: number): Promise<void> {
  const signal = (s: NodeJS.Signals) => {
    for (const pid of pids) {
      try {
        process.kill(pid, s);
      } catch {
        // gone
      }
    }
  };
  signal('SIGSTOP');
  await sleep(ms);
  signal('SIGCONT');
}

/** A clock control file in the format of libfaketime's FAKETIME_TIMESTAMP_FILE ("+2.5" s). */
function clockFile(dir: string): { path: string; set(offsetMs: number): void } {
  const path = join(dir, 'clock-offset');
  const set = (offsetMs: number) => {
    const text = `${offsetMs >= 0 ? '+' : '-'}${(Math.abs(offsetMs) / 1000).toFixed(3)}\n`;
    // Written whole, then renamed: a reader never sees half a line.
    writeFileSync(`${path}.tmp`, text);
    renameSync(`${path}.tmp`, path);
  };
  set(0);
  return { path, set };
}

/** The timeshift preload (native/timeshift.c), built with the system's cc once per machine. */
function timeshiftLibrary(): string | undefined {
  const source = here('../native/timeshift.c');
  const digest = createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 12);
  const out = join(tmpdir(), `idt-chaos-timeshift-${digest}.so`);
  if (existsSync(out)) return out;
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', `${out}.tmp`, source], {
      stdio: 'ignore',
    });
    renameSync(`${out}.tmp`, out);
    return out;
  } catch {
    return undefined;
  }
}

const LIBFAKETIME = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
  '/usr/local/lib/faketime/libfaketime.so.1',
].find((p) => existsSync(p));

/** One redis-server process that can be crashed and started again with the same arguments. */
class RedisNode {
  readonly port: number;
  readonly #args: string[];
  readonly #env: NodeJS.ProcessEnv | undefined;
  #child: Child | undefined;

  constructor(port: number, dir: string, extra: string[], env?: NodeJS.ProcessEnv) {
    this.port = port;
    this.#env = env;
    mkdirSync(dir, { recursive: true });
    this.#args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--daemonize',
      'no',
      ...extra,
    ];
  }

  get pid(): number | undefined {
    return this.#child?.process.pid;
  }

  async start(): Promise<void> {
    const child = spawnChild('redis-server', this.#args, this.#env);
    this.#child = child;
    const deadline = Date.now() + 120_000; // a hang detector, not a budget
    for (;;) {
      if (child.process.exitCode !== null) {
        throw new Error(`redis-server on ${this.port} exited: ${child.output()}`);
      }
      try {
        const { stdout } = await exec('redis-cli', ['-p', String(this.port), 'ping'], {
          timeout: 2_000,
        });
        if (stdout.trim() === 'PONG') return;
      } catch {
        // not up yet (or still loading the AOF)
      }
      if (Date.now() > deadline) {
        await killChild(child);
        throw new Error(`redis-server on ${this.port} did not answer: ${child.output()}`);
      }
      await sleep(50);
    }
  }

  async kill(): Promise<void> {
    if (this.#child !== undefined) await killChild(this.#child);
    this.#child = undefined;
  }
}

async function redisVersion(): Promise<string> {
  const { stdout } = await exec('redis-server', ['--version']);
  return /v=(\S+)/.exec(stdout)?.[1] ?? stdout.trim();
}

function redisClock(dir: string) {
  const lib = timeshiftLibrary();
  if (lib === undefined) return undefined;
  const file = clockFile(dir);
  return { file, env: { LD_PRELOAD: lib, TIMESHIFT_FILE: file.path } };
}

async function startRedis(target: Target, dir: string, downMs: number): Promise<Engine> {
  const [port] = await freePorts(1);
  const clock = redisClock(dir);
  const node = new RedisNode(port!, join(dir, 'redis'), [], clock?.env);
  await node.start();
  const base = { kind: 'redis' as const, driver: target.driver, prefix: 'chaos:' };
  return {
    target,
    config: { ...base, host: '127.0.0.1', port: port! },
    describe: `redis-server ${await redisVersion()} on 127.0.0.1:${port}, appendonly yes, appendfsync always${clock ? ', its clock shifted by a preload' : ''}`,
    endpoints: [{ host: '127.0.0.1', port: port! }],
    workerConfig: (proxied) => ({
      ...base,
      host: '127.0.0.1',
      port: proxied?.[0]?.port ?? port!,
    }),
    faults: new Set<FaultKind>([
      'kill',
      'stop',
      'vendor',
      'proxy',
      'outage',
      'restart',
      ...(clock ? (['clock'] as const) : []),
    ]),
    clock: 'store',
    singleProcess: false,
    restart: async () => {
      await node.kill();
      await sleep(downMs);
      await node.start();
      return `kill -9 redis-server :${port}, started again on its AOF`;
    },
    outage: async (ms) => {
      await freeze([node.pid ?? 0], ms);
      return `SIGSTOP redis-server :${port} for ${ms} ms`;
    },
    ...(clock ? { setClock: (offsetMs: number) => clock.file.set(offsetMs) } : {}),
    stop: () => node.kill(),
  };
}

async function clusterOk(port: number): Promise<boolean> {
  try {
    const { stdout } = await exec('redis-cli', ['-p', String(port), 'cluster', 'info'], {
      timeout: 2_000,
    });
    return stdout.includes('cluster_state:ok');
  } catch {
    return false;
  }
}

async function waitClusterOk(ports: number[], timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = await Promise.all(ports.map(clusterOk));
    if (states.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error(`cluster_state not ok on ${ports.join(', ')}`);
    await sleep(100);
  }
}

async function startCluster(target: Target, dir: string, downMs: number): Promise<Engine> {
  const masters = 3;
  const ports = await freePorts(masters, true);
  const clock = redisClock(dir);
  const nodes = ports.map((port) => {
    const nodeDir = join(dir, `cluster-${port}`);
    return new RedisNode(
      port,
      nodeDir,
      [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(nodeDir, 'nodes.conf'),
        '--cluster-node-timeout',
        '3000',
      ],
      clock?.env,
    );
  });
  await Promise.all(nodes.map((node) => node.start()));
  await exec(
    'redis-cli',
    [
      '--cluster',
      'create',
      ...ports.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ],
    { timeout: 30_000 },
  );
  await waitClusterOk(ports);
  const config: StoreConfig = {
    kind: 'cluster',
    driver: target.driver,
    nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
    prefix: 'chaos:',
  };
  return {
    target,
    config,
    describe: `Redis Cluster of ${masters} masters (redis-server ${await redisVersion()}, no replicas), each appendonly yes, appendfsync always${clock ? ', their clocks shifted by a preload' : ''}`,
    // A proxy per master would need every client's address map (MOVED names the real ports):
    // the cluster takes engine faults (restart, outage of one master) and no proxy faults.
    endpoints: [],
    workerConfig: () => config,
    faults: new Set<FaultKind>([
      'kill',
      'stop',
      'vendor',
      'outage',
      'restart',
      ...(clock ? (['clock'] as const) : []),
    ]),
    clock: 'store',
    singleProcess: false,
    restart: async (random) => {
      const node = random.pick(nodes);
      await node.kill();
      await sleep(downMs);
      await node.start();
      await waitClusterOk(ports);
      return `kill -9 master :${node.port}, started again on its AOF and nodes.conf`;
    },
    outage: async (ms, random) => {
      const node = random.pick(nodes);
      await freeze([node.pid ?? 0], ms);
      return `SIGSTOP master :${node.port} for ${ms} ms`;
    },
    ...(clock ? { setClock: (offsetMs: number) => clock.file.set(offsetMs) } : {}),
    stop: async () => {
      await Promise.all(nodes.map((node) => node.kill()));
    },
  };
}

/** Directory of initdb / postgres: `PG_BIN`, else the newest /usr/lib/postgresql/<v>/bin. */
export function findPostgresBin(): string | undefined {
  if (process.env.PG_BIN !== undefined) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/** The children of `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone
    }
  }
  return out;
}

async function startPostgres(target: Target, dir: string, downMs: number): Promise<Engine> {
  const bin = findPostgresBin();
  if (bin === undefined) {
    throw new Error('PostgreSQL server binaries not found: install postgresql or set PG_BIN');
  }
  const home = join(dir, 'pg');
  const data = join(home, 'data');
  mkdirSync(home, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  const prefix = asRoot ? ['runuser', '-u', 'postgres', '--'] : [];
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(home, uid, gid);
    chmodSync(dir, 0o711);
  }
  const clock = LIBFAKETIME === undefined ? undefined : clockFile(home);
  if (clock !== undefined) chmodSync(clock.path, 0o644);
  else {
    console.warn(
      '[chaos] libfaketime not found (Debian: apt-get install -y faketime): PostgreSQL runs without clock steps.',
    );
  }
  const run = (args: string[], env: string[] = []) => {
    const [command, ...rest] = [...prefix, 'env', ...env, ...args];
    return spawnChild(command!, rest);
  };
  const init = run([
    join(bin, 'initdb'),
    '-D',
    data,
    '-U',
    'root',
    '--auth=trust',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
  ]);
  await init.exited;
  if (init.process.exitCode !== 0) throw new Error(`initdb failed: ${init.output()}`);
  const port = await freePort();
  let child: Child | undefined;
  const { default: pg } = await import('pg');
  const url = `postgres://root@127.0.0.1:${port}/postgres`;
  const faketime =
    clock === undefined
      ? []
      : [
          `LD_PRELOAD=${LIBFAKETIME}`,
          `FAKETIME_TIMESTAMP_FILE=${clock.path}`,
          'FAKETIME_NO_CACHE=1',
          'FAKETIME_DONT_FAKE_MONOTONIC=1',
        ];

  const start = async () => {
    const server = run(
      [
        join(bin, 'postgres'),
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        home,
        '-h',
        '127.0.0.1',
        '-c',
        'max_connections=200',
        '-c',
        'shared_buffers=32MB',
      ],
      faketime,
    );
    child = server;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (server.process.exitCode !== null) {
        throw new Error(`postgres exited: ${server.output()}`);
      }
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.end();
        return;
      } catch {
        await client.end().catch(() => {});
      }
      if (Date.now() > deadline) throw new Error(`postgres did not start: ${server.output()}`);
      await sleep(100);
    }
  };
  const postmaster = () => {
    try {
      return Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return undefined;
    }
  };
  const crash = async () => {
    const running = child;
    if (running === undefined) return;
    // runuser stops itself when its child is stopped (job control): continue it too.
    running.process.kill('SIGCONT');
    const pid = postmaster();
    if (pid !== undefined) {
      for (const p of [pid, ...childrenOf(pid)]) {
        try {
          process.kill(p, 'SIGCONT');
        } catch {
          // gone
        }
      }
      process.kill(pid, 'SIGQUIT');
    }
    await running.exited;
    child = undefined;
  };
  process.once('exit', () => {
    const pid = child === undefined ? undefined : postmaster();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGQUIT');
      } catch {
        // already gone
      }
    }
  });
  await start();
  const { stdout } = await exec(join(bin, 'postgres'), ['--version']);
  const base = { kind: 'postgres' as const, driver: target.driver, table: 'chaos_records' };
  const config: StoreConfig = { ...base, host: '127.0.0.1', port, database: 'postgres' };
  return {
    target,
    config,
    describe: `${stdout.trim()} on 127.0.0.1:${port} (initdb on a temp dir, fsync on${clock ? ', under libfaketime' : ''})`,
    endpoints: [{ host: '127.0.0.1', port }],
    workerConfig: (proxied) => ({ ...config, port: proxied?.[0]?.port ?? port }),
    faults: new Set<FaultKind>([
      'kill',
      'stop',
      'vendor',
      'proxy',
      'outage',
      'restart',
      ...(clock ? (['clock'] as const) : []),
    ]),
    clock: 'store',
    singleProcess: false,
    prepare: async () => {
      const { openStore } = await import('./stores.ts');
      const setup = await openStore(config);
      await (setup.store as unknown as { ensureSchema(): Promise<void> }).ensureSchema();
      await setup.close();
    },
    restart: async () => {
      await crash();
      await sleep(downMs);
      await start();
      return `immediate shutdown (SIGQUIT) of postgres :${port}, started again (WAL recovery)`;
    },
    outage: async (ms) => {
      const pid = postmaster();
      if (pid === undefined) return 'no postmaster';
      const pids = [pid, ...childrenOf(pid)];
      await freeze(pids, ms);
      // runuser stopped itself with its child (job control): continue it too.
      child?.process.kill('SIGCONT');
      return `SIGSTOP postgres :${port} (${pids.length} processes) for ${ms} ms`;
    },
    ...(clock ? { setClock: (offsetMs: number) => clock.set(offsetMs) } : {}),
    stop: async () => {
      await crash().catch(() => {});
    },
  };
}

async function startDynamo(target: Target): Promise<Engine> {
  // dynalite in a process of its own (SIGSTOP is its outage), as store-dynamodb's tests start it.
  const child = spawn(process.execPath, [here('./dynalite-process.ts')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`dynalite exited (${code})`)));
  });
  const config: StoreConfig = {
    kind: 'dynamodb',
    driver: target.driver,
    host: '127.0.0.1',
    port,
    table: 'chaos-records',
    prefix: 'chaos',
  };
  return {
    target,
    config,
    describe: `dynalite 4 (in-memory DynamoDB) on 127.0.0.1:${port}, @aws-sdk/client-dynamodb`,
    endpoints: [{ host: '127.0.0.1', port }],
    workerConfig: (proxied) => ({ ...config, port: proxied?.[0]?.port ?? port }),
    faults: new Set<FaultKind>(['kill', 'stop', 'vendor', 'proxy', 'outage', 'clock']),
    clock: 'workers',
    singleProcess: false,
    prepare: async () => {
      const { DynamoDBClient } = await import('@aws-sdk/client-dynamodb');
      const { ensureTable } = await import('@idempotent-tools/store-dynamodb');
      const client = new DynamoDBClient({
        endpoint: `http://127.0.0.1:${port}`,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      await ensureTable(client, config.table!);
      client.destroy();
    },
    outage: async (ms) => {
      await freeze([child.pid ?? 0], ms);
      return `SIGSTOP dynalite for ${ms} ms`;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exited;
    },
  };
}

function startSqlite(target: Target, dir: string): Engine {
  const path = join(dir, 'chaos.sqlite');
  const config: StoreConfig = { kind: 'sqlite', driver: target.driver, path };
  return {
    target,
    config,
    describe: `SQLite file (${target.driver}, WAL), shared by every worker`,
    endpoints: [],
    workerConfig: () => config,
    faults: new Set<FaultKind>(['kill', 'stop', 'vendor', 'outage', 'clock']),
    clock: 'workers',
    singleProcess: false,
    outage: async (ms) => {
      // Another process takes the write lock and holds it: writers wait, then fail (busy).
      const code = `const { DatabaseSync } = require('node:sqlite'); const db = new DatabaseSync(${JSON.stringify(path)}, { timeout: 5000 }); db.exec('BEGIN EXCLUSIVE'); process.send('locked'); setTimeout(() => { db.exec('COMMIT'); db.close(); process.exit(0); }, ${ms});`;
      const holder = spawn(process.execPath, ['-e', code], {
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      live.add(holder);
      await new Promise<void>((resolve) => {
        holder.once('exit', () => {
          live.delete(holder);
          resolve();
        });
      });
      return `a process held the SQLite file's exclusive lock for ${ms} ms`;
    },
    stop: async () => {},
  };
}

function startPglite(target: Target, dir: string): Engine {
  const path = join(dir, 'pglite');
  const config: StoreConfig = {
    kind: 'pglite',
    driver: target.driver,
    path,
    table: 'chaos_records',
  };
  return {
    target,
    config,
    describe: 'PGlite 0.5 (WASM PostgreSQL) on a data dir, inside the one worker process',
    endpoints: [],
    workerConfig: () => config,
    faults: new Set<FaultKind>(['kill', 'vendor', 'clock']),
    clock: 'workers',
    singleProcess: true,
    stop: async () => {},
  };
}

/** Start the engine of `target` under `dir`. */
export async function startEngine(
  target: Target,
  dir: string,
  options: { downMs: number },
): Promise<Engine> {
  switch (target.store) {
    case 'sqlite':
      return startSqlite(target, dir);
    case 'redis':
      return startRedis(target, dir, options.downMs);
    case 'cluster':
      return startCluster(target, dir, options.downMs);
    case 'postgres':
      return startPostgres(target, dir, options.downMs);
    case 'pglite':
      return startPglite(target, dir);
    case 'dynamodb':
      return startDynamo(target);
  }
}

/** Why the engine of `target` cannot run here, or undefined when it can. */
export async function engineMissing(target: Target): Promise<string | undefined> {
  try {
    if (target.store === 'redis' || target.store === 'cluster') {
      await exec('redis-server', ['--version']);
      await exec('redis-cli', ['--version']);
    }
    if (target.store === 'postgres' && findPostgresBin() === undefined) {
      return 'PostgreSQL server binaries (initdb, postgres) not found; set PG_BIN';
    }
    if (process.getBuiltinModule?.('node:sqlite') === undefined) {
      return 'node:sqlite is missing (Node >= 22.13)';
    }
    if (target.driver === 'better-sqlite3') {
      const { default: Database } = await import('better-sqlite3');
      new Database(':memory:').close();
    }
    return undefined;
  } catch (error) {
    return `${target.store}/${target.driver}: ${String(error).slice(0, 200)}`;
  }
}
