/**
 * Throwaway `redis-server` processes on loopback for tests (outage, Cluster). Test-only: not
 * part of the package build.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** Start `redis-server` on 127.0.0.1:`port` with no persistence; resolves once it answers PING. */
export async function startRedisServer(options: {
  port: number;
  dir: string;
  args?: string[];
}): Promise<RedisServer> {
  const { port, dir } = options;
  const child = spawn(
    'redis-server',
    [
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
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
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
  const deadline = Date.now() + 10_000;
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

/** A fresh temporary directory and its removal. */
export function tempDir(label: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), `idem-${label}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
