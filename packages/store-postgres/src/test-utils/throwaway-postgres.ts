/**
 * A throwaway PostgreSQL server for outage tests: `initdb` into a temp dir, `postgres` as a child
 * process, stopped with an immediate shutdown (a crash) and started again on the same data.
 * As root it runs as the `postgres` user (PostgreSQL refuses to run as root).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '@idempotent-tools/testing';
import pg from 'pg';

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

function hasSetpriv(): boolean {
  try {
    execFileSync('setpriv', ['--help'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface ThrowawayPostgres {
  url: string;
  /** Start the server (again) and wait until it accepts connections. */
  start(): Promise<void>;
  /** Immediate shutdown (SIGQUIT): like a crash, WAL recovery on the next start. */
  stop(): Promise<void>;
  /** Stop it and delete its files. */
  destroy(): Promise<void>;
}

export async function createThrowawayPostgres(bin: string): Promise<ThrowawayPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'idt-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  // `setpriv` (util-linux) execs the server as `postgres` when run as root, and with a
  // parent-death signal: the kernel kills the server when the test process dies in any way, so no
  // server outlives its test (without setpriv: `runuser`, and the suite's own cleanup).
  const setpriv = hasSetpriv();
  let prefix: string[] = setpriv ? ['setpriv', '--pdeathsig', 'KILL', '--'] : [];
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
    prefix = setpriv
      ? [
          'setpriv',
          `--reuid=${uid}`,
          `--regid=${gid}`,
          '--init-groups',
          '--pdeathsig',
          'KILL',
          '--',
        ]
      : ['runuser', '-u', 'postgres', '--'];
  }
  const run = (args: string[]) => {
    const [command, ...rest] = [...prefix, ...args];
    return spawn(command!, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
  };
  await new Promise<void>((resolve, reject) => {
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
    let log = '';
    init.stdout?.on('data', (d) => (log += d));
    init.stderr?.on('data', (d) => (log += d));
    init.on('error', reject);
    init.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`initdb: ${log}`))));
  });
  const port = await freePort();
  const url = `postgres://root@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;
  let log = '';

  const start = async () => {
    child = run([
      join(bin, 'postgres'),
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-h',
      '127.0.0.1',
      '-c',
      'max_connections=30',
      '-c',
      'shared_buffers=16MB',
    ]);
    child.stdout?.on('data', (d) => (log += d));
    child.stderr?.on('data', (d) => (log += d));
    for (let i = 0; i < 150; i++) {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.end();
        return;
      } catch {
        await sleep(100);
      }
    }
    throw new Error(`throwaway PostgreSQL did not start: ${log}`);
  };

  const stop = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    process.kill(pid, 'SIGQUIT');
    await exited;
    child = undefined;
  };

  await start();
  return {
    url,
    start,
    stop,
    destroy: async () => {
      await stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
