/**
 * The real Restate server (the binary of the `@restatedev/restate-server` package) on 127.0.0.1,
 * on free ports, with its data in a temp folder; and a service deployment served by a child Node
 * process that can be killed and started again on the same port.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { sleep } from '@idempotent-tools/testing';

const require = createRequire(import.meta.url);

/** The server binary the npm package ships for this platform (its `bin` only spawns it). */
export function restateServerBinary(): string {
  const pkg = dirname(require.resolve('@restatedev/restate-server/package.json'));
  const platform = `@restatedev/restate-server-${process.platform}-${process.arch}`;
  return createRequire(join(pkg, 'index.js')).resolve(`${platform}/bin/restate-server`);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  tries = 600,
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export interface RestateServer {
  ingress: string;
  admin: string;
  /** Register (or re-register) the deployment at `uri` (`http://127.0.0.1:PORT`). */
  register(uri: string): Promise<void>;
  stop(): Promise<void>;
  log(): string;
}

export async function startRestateServer(): Promise<RestateServer> {
  const dir = mkdtempSync(join(tmpdir(), 'restate-'));
  const [ingressPort, adminPort, nodePort] = [await freePort(), await freePort(), await freePort()];
  let output = '';
  const proc = spawn(
    restateServerBinary(),
    ['--no-logo', '--base-dir', dir, '--node-name', 'test', '--listen-mode', 'tcp'],
    {
      env: {
        ...process.env,
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
        RESTATE_BIND_ADDRESS: `127.0.0.1:${nodePort}`,
        RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${nodePort}/`,
        RESTATE_DEFAULT_NUM_PARTITIONS: '1',
        RESTATE_DISABLE_TELEMETRY: 'true',
        RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE: '256MiB',
        RESTATE_LOG_DISABLE_ANSI_CODES: 'true',
        // A retry of an attempt that died comes soon (the default starts at 500 ms).
        RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL: '100ms',
        RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL: '1s',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  proc.stdout?.on('data', (c) => (output += String(c)));
  proc.stderr?.on('data', (c) => (output += String(c)));
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  const admin = `http://127.0.0.1:${adminPort}`;
  const ingress = `http://127.0.0.1:${ingressPort}`;
  try {
    await until('the Restate admin API', async () =>
      (await fetch(`${admin}/health`)).ok ? true : undefined,
    );
    await until('the Restate ingress', async () => {
      const res = await fetch(`${ingress}/restate/health`);
      return res.ok ? true : undefined;
    });
  } catch (error) {
    proc.kill('SIGKILL');
    throw new Error(`${(error as Error).message}\n${output}`);
  }
  return {
    ingress,
    admin,
    async register(uri) {
      await until(`registering ${uri}`, async () => {
        const res = await fetch(`${admin}/deployments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ uri, force: true }),
        });
        if (res.ok) return true;
        output += `\nregister: ${res.status} ${await res.text()}`;
        return undefined;
      });
    },
    async stop() {
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
    },
    log: () => output,
  };
}

/** A service deployment in a child Node process (`node --import tsx module`), on `port`. */
export interface ServiceProcess {
  port: number;
  uri: string;
  /** Start the process (again), wait until it listens. */
  start(env?: Record<string, string>): Promise<void>;
  /** Resolves when the process exits: the signal that ended it. */
  exited(): Promise<NodeJS.Signals | number | null>;
  stop(): Promise<void>;
  output(): string;
}

export async function serviceProcess(
  module: string,
  cwd: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const port = await freePort();
  let proc: ChildProcess | undefined;
  let ended: Promise<NodeJS.Signals | number | null> = Promise.resolve(null);
  let output = '';
  const uri = `http://127.0.0.1:${port}`;
  return {
    port,
    uri,
    async start(extra = {}) {
      const child = spawn(process.execPath, ['--import', 'tsx', module], {
        cwd,
        env: { ...process.env, ...env, ...extra, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      proc = child;
      child.stdout?.on('data', (c) => (output += String(c)));
      child.stderr?.on('data', (c) => (output += String(c)));
      ended = new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
      await until(`the service on ${uri}`, async () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error('exited');
        return await new Promise<true>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1', () => {
            socket.end();
            resolve(true);
          });
          socket.on('error', reject);
        });
      });
    },
    exited: () => ended,
    async stop() {
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await ended;
      }
    },
    output: () => output,
  };
}
