/**
 * The engines under test, started by the harness itself on 127.0.0.1 in a temp dir, and how the
 * chaos loop restarts each one (a crash, never a clean shutdown):
 *
 * - SQLite: a file; nothing to restart (the chaos loop kills workers mid-transaction instead).
 * - Redis: `appendonly yes`, `appendfsync always`; kill -9 and start again on the same AOF.
 * - Redis Cluster: 3 masters, each with its own AOF (always); kill -9 one master and start it
 *   again on its AOF and nodes.conf (it rejoins with its slots).
 * - PostgreSQL: `initdb` on a temp dir; immediate shutdown (SIGQUIT: WAL recovery on start) and
 *   start again.
 *
 * Modelled on packages/store-redis/src/test-utils (redis-server.ts, redis-cluster.ts) and
 * packages/store-postgres/src/test-utils/throwaway-postgres.ts.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Random } from './random.ts';
import type { StoreConfig, StoreKind } from './types.ts';

const exec = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Engine {
  kind: StoreKind;
  config: StoreConfig;
  /** What runs, for the report. */
  describe: string;
  /** Crash the engine (or one node of it) and start it again; undefined: nothing to restart. */
  restart?: (random: Random) => Promise<string>;
  /** Kill everything it started. */
  stop(): Promise<void>;
}

/** Every child an engine started, killed if the harness exits without stopping them. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
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

/** A child process and its exit, with the tail of its output for error messages. */
interface Child {
  process: ChildProcess;
  exited: Promise<void>;
  output(): string;
}

function spawnChild(command: string, args: string[]): Child {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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
    child.process.kill(signal);
  }
  await child.exited;
}

/** One redis-server process that can be crashed and started again with the same arguments. */
class RedisNode {
  readonly port: number;
  readonly #args: string[];
  #child: Child | undefined;

  constructor(port: number, dir: string, extra: string[]) {
    this.port = port;
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

  async start(): Promise<void> {
    const child = spawnChild('redis-server', this.#args);
    this.#child = child;
    const deadline = Date.now() + 20_000;
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

async function startRedis(dir: string, downMs: number): Promise<Engine> {
  const [port] = await freePorts(1);
  const node = new RedisNode(port!, join(dir, 'redis'), []);
  await node.start();
  return {
    kind: 'redis',
    config: { kind: 'redis', url: `redis://127.0.0.1:${port}`, prefix: 'chaos:' },
    describe: `redis-server ${await redisVersion()} on 127.0.0.1:${port}, appendonly yes, appendfsync always`,
    restart: async () => {
      await node.kill();
      await sleep(downMs);
      await node.start();
      return `kill -9 redis-server :${port}, started again on its AOF`;
    },
    stop: () => node.kill(),
  };
}

async function redisVersion(): Promise<string> {
  const { stdout } = await exec('redis-server', ['--version']);
  return /v=(\S+)/.exec(stdout)?.[1] ?? stdout.trim();
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

async function waitClusterOk(ports: number[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const states = await Promise.all(ports.map(clusterOk));
    if (states.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error(`cluster_state not ok on ${ports.join(', ')}`);
    await sleep(100);
  }
}

async function startCluster(dir: string, downMs: number, masters = 3): Promise<Engine> {
  const ports = await freePorts(masters, true);
  const nodes = ports.map((port) => {
    const nodeDir = join(dir, `cluster-${port}`);
    return new RedisNode(port, nodeDir, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(nodeDir, 'nodes.conf'),
      '--cluster-node-timeout',
      '3000',
    ]);
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
  return {
    kind: 'cluster',
    config: {
      kind: 'cluster',
      nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
      prefix: 'chaos:',
    },
    describe: `Redis Cluster of ${masters} masters (redis-server ${await redisVersion()}, no replicas), each appendonly yes, appendfsync always`,
    restart: async (random) => {
      const node = random.pick(nodes);
      await node.kill();
      await sleep(downMs);
      await node.start();
      await waitClusterOk(ports);
      return `kill -9 master :${node.port}, started again on its AOF and nodes.conf`;
    },
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

async function startPostgres(dir: string, downMs: number): Promise<Engine> {
  const bin = findPostgresBin();
  if (bin === undefined) {
    throw new Error('PostgreSQL server binaries not found: install postgresql or set PG_BIN');
  }
  const home = join(dir, 'pg');
  const data = join(home, 'data');
  mkdirSync(home, { recursive: true });
  // PostgreSQL refuses to run as root: as root it runs as the postgres user.
  const asRoot = process.getuid?.() === 0;
  const prefix = asRoot ? ['runuser', '-u', 'postgres', '--'] : [];
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(home, uid, gid);
    // The soak's dir is the harness's (mode 0700): the postgres user must be able to pass it.
    chmodSync(dir, 0o711);
  }
  const run = (args: string[]) => {
    const [command, ...rest] = [...prefix, ...args];
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
  const url = `postgres://root@127.0.0.1:${port}/postgres`;
  let child: Child | undefined;
  const { default: pg } = await import('pg');

  const start = async () => {
    const server = run([
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
    ]);
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
  // Immediate shutdown (SIGQUIT to the postmaster): no checkpoint, WAL recovery on the next start.
  const crash = async () => {
    const running = child;
    if (running === undefined) return;
    const pid = postmaster();
    if (pid !== undefined) process.kill(pid, 'SIGQUIT');
    await running.exited;
    child = undefined;
  };
  // The postmaster is runuser's child: killing runuser (the 'exit' handler above) leaves it.
  const postmaster = () => {
    try {
      return Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return undefined;
    }
  };
  process.once('exit', () => {
    const pid = child === undefined ? undefined : postmaster();
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // already gone
      }
    }
  });
  await start();
  const { stdout } = await exec(join(bin, 'postgres'), ['--version']);
  return {
    kind: 'postgres',
    config: { kind: 'postgres', url, table: 'chaos_records' },
    describe: `${stdout.trim()} on 127.0.0.1:${port} (initdb on a temp dir, fsync on)`,
    restart: async () => {
      await crash();
      await sleep(downMs);
      await start();
      return `immediate shutdown (SIGQUIT) of postgres :${port}, started again (WAL recovery)`;
    },
    stop: async () => {
      await crash().catch(() => {});
    },
  };
}

/** Start the engine of `kind` under `dir`. */
export async function startEngine(
  kind: StoreKind,
  dir: string,
  options: { downMs: number },
): Promise<Engine> {
  switch (kind) {
    case 'sqlite':
      return {
        kind,
        config: { kind, path: join(dir, 'chaos.sqlite') },
        describe: 'SQLite file (node:sqlite, WAL, synchronous NORMAL), shared by every worker',
        stop: async () => {},
      };
    case 'redis':
      return startRedis(dir, options.downMs);
    case 'cluster':
      return startCluster(dir, options.downMs);
    case 'postgres':
      return startPostgres(dir, options.downMs);
  }
}

/** Why the engine of `kind` cannot run here, or undefined when it can. */
export async function engineMissing(kind: StoreKind): Promise<string | undefined> {
  try {
    if (kind === 'redis' || kind === 'cluster') {
      await exec('redis-server', ['--version']);
      await exec('redis-cli', ['--version']);
    }
    if (kind === 'postgres' && findPostgresBin() === undefined) {
      return 'PostgreSQL server binaries (initdb, postgres) not found; set PG_BIN';
    }
    if (kind === 'sqlite' && process.getBuiltinModule?.('node:sqlite') === undefined) {
      return 'node:sqlite is missing (Node >= 22.13)';
    }
    return undefined;
  } catch (error) {
    return `redis-server / redis-cli not found on PATH (${String(error)})`;
  }
}
