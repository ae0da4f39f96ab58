/**
 * Throwaway `redis-server` processes on loopback for tests (outage, Cluster). Test-only: not
 * part of the package build.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** True when nothing listens on `port` on 127.0.0.1. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * `count` free loopback ports. With `bus`, `port + 10000` (the Cluster bus port) is free too.
 * Ports are drawn at random from 20000-29999 so parallel runs rarely meet.
 */
export async function freePorts(count: number, { bus = false } = {}): Promise<number[]> {
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count && attempt < 1000; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (ports.includes(port)) continue;
    if (!(await portFree(port))) continue;
    if (bus && !(await portFree(port + 10_000))) continue;
    ports.push(port);
  }
  if (ports.length < count) throw new Error(`found only ${ports.length} free ports of ${count}`);
  return ports;
}

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** SIGKILL the server and wait for it to exit (no save, like a crash). */
  kill(): Promise<void>;
}

const live = new Set<ChildProcess>();
/** Servers still starting: `stopRedisServers` waits for them, so none starts after it. */
const starting = new Set<Promise<unknown>>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * `setpriv --pdeathsig KILL` (util-linux) where there is one: the kernel kills the server when the
 * process that started it dies in any way (a vitest worker terminated mid-test runs no `exit`
 * handler), so no server outlives its test process.
 */
const PDEATHSIG = (() => {
  try {
    execFileSync('setpriv', ['--help'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/**
 * Kill every server this process started, after waiting for the ones still starting (a restart
 * a test left in flight). Call it in `afterAll`; the suite's global teardown checks that no
 * server outlived the run (`global-setup.ts`).
 */
export async function stopRedisServers(): Promise<void> {
  while (starting.size > 0) await Promise.allSettled([...starting]);
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** Start `redis-server` on 127.0.0.1:`port` with no persistence; resolves once it answers PING. */
export function startRedisServer(options: {
  port: number;
  dir: string;
  args?: string[];
}): Promise<RedisServer> {
  const started = launch(options);
  starting.add(started);
  const forget = () => starting.delete(started);
  started.then(forget, forget);
  return started;
}

async function launch(options: {
  port: number;
  dir: string;
  args?: string[];
}): Promise<RedisServer> {
  const { port, dir } = options;
  const argv = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    ...(options.args ?? []),
  ];
  const child = PDEATHSIG
    ? spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'redis-server', ...argv], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn('redis-server', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    child.once('exit', () => {
      live.delete(child);
      resolve();
    });
  });
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    process: child,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  const deadline = Date.now() + 120_000; // a hang detector, not a budget
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`redis-server on port ${port} exited (${child.exitCode}): ${output}`);
    }
    const probe = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return server;
    } catch {
      probe.disconnect();
    }
    if (Date.now() > deadline) {
      await server.kill();
      throw new Error(`redis-server on port ${port} did not answer within 10 s: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A fresh temporary directory and its removal: under the run's own directory when the global
 * setup made one (`IDEM_REDIS_TEST_DIR`), where the teardown looks for servers left running.
 */
export function tempDir(label: string): { dir: string; remove(): void } {
  const base = process.env.IDEM_REDIS_TEST_DIR ?? tmpdir();
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `idem-${label}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
