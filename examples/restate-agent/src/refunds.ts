/**
 * The whole run, offline: the Restate server from the `@restatedev/restate-server` package on
 * 127.0.0.1 (free ports, a temp data folder), a bank (an HTTP API in this process that counts
 * refunds), and the service (`src/service.ts`) in a child process that is killed once mid-run
 * and started again, so Restate retries the invocation there.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { connect, createServer as createTcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createTcpServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await probe().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The restate-server binary the npm package installed for this platform. */
function restateServerBinary(): string {
  const pkg = dirname(require.resolve('@restatedev/restate-server/package.json'));
  const platform = `@restatedev/restate-server-${process.platform}-${process.arch}`;
  return createRequire(join(pkg, 'index.js')).resolve(`${platform}/bin/restate-server`);
}

async function startRestate(dataDir: string) {
  const [ingressPort, adminPort, nodePort] = [await freePort(), await freePort(), await freePort()];
  const proc = spawn(
    restateServerBinary(),
    ['--no-logo', '--base-dir', dataDir, '--node-name', 'demo', '--listen-mode', 'tcp'],
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
        RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL: '100ms',
        RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL: '1s',
      },
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  const admin = `http://127.0.0.1:${adminPort}`;
  const ingress = `http://127.0.0.1:${ingressPort}`;
  await until('restate-server', async () => (await fetch(`${admin}/health`)).ok);
  await until('the ingress', async () => (await fetch(`${ingress}/restate/health`)).ok);
  return {
    ingress,
    register: (uri: string) =>
      until(`registering ${uri}`, async () => {
        const res = await fetch(`${admin}/deployments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ uri, force: true }),
        });
        await res.arrayBuffer();
        return res.ok;
      }),
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

/** A bank: `POST /refunds` pays one (an effect) and records the request's Idempotency-Key. */
async function startBank() {
  const refunds: Array<{ refundId: string; amount: number; key: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += String(chunk)));
    req.on('end', () => {
      const { amount } = JSON.parse(body || '{}') as { amount: number };
      const refund = { refundId: `rf_${refunds.length + 1}`, amount };
      refunds.push({ ...refund, key: String(req.headers['idempotency-key']) });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(refund));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    refunds,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const serviceModule = fileURLToPath(new URL('./service.ts', import.meta.url));

/** The service in a child process on `port`; `start()` again after it died. */
function serviceOn(port: number, env: Record<string, string>) {
  let proc: ChildProcess | undefined;
  let exited: Promise<string | number | null> = Promise.resolve(null);
  return {
    uri: `http://127.0.0.1:${port}`,
    async start() {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', '--disable-warning=ExperimentalWarning', serviceModule],
        {
          env: { ...process.env, RESTATE_LOGGING: 'ERROR', ...env, PORT: String(port) },
          stdio: ['ignore', 'ignore', 'inherit'],
        },
      );
      proc = child;
      exited = new Promise((resolve) =>
        child.on('exit', (code, signal) => resolve(signal ?? code)),
      );
      await until('the service', async () => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error('it exited');
        return new Promise<boolean>((resolve) => {
          const socket = connect(port, '127.0.0.1', () => {
            socket.end();
            resolve(true);
          });
          socket.on('error', () => resolve(false));
        });
      });
    },
    exited: () => exited,
    async stop() {
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGKILL');
        await exited;
      }
    },
  };
}

export interface RefundRun {
  /** What the invocation answered. */
  answer: unknown;
  /** How the first service process ended (`SIGKILL`). */
  killed: string | number | null;
  /** The refunds the bank paid, with the Idempotency-Key of each request. */
  refunds: Array<{ refundId: string; amount: number; key: string }>;
}

/**
 * One refund invocation whose service process is killed after the refund was paid and before
 * Restate recorded the run, then started again: `plain` runs the refund in a plain `ctx.run`.
 */
export async function runRefund(options: { plain: boolean; log?: (line: string) => void }) {
  const log = options.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), 'restate-agent-'));
  mkdirSync(join(dir, 'restate'));
  const restate = await startRestate(join(dir, 'restate'));
  const bank = await startBank();
  const service = serviceOn(await freePort(), {
    BANK: bank.url,
    DB: join(dir, 'idempotency.sqlite'),
    CRASH_ONCE: join(dir, 'crashed'),
    PLAIN: options.plain ? '1' : '',
  });
  try {
    await service.start();
    await restate.register(service.uri);
    log('invoking agent.refund { amount: 40 } through the Restate ingress');
    const answer = fetch(`${restate.ingress}/agent/refund`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 40 }),
    }).then((res) => res.json() as Promise<unknown>);
    const killed = await service.exited();
    log(
      `the service process was killed (${killed}) after the bank paid, before Restate recorded the run`,
    );
    await service.start();
    log('service started again: Restate retries the invocation');
    const result: RefundRun = { answer: await answer, killed, refunds: bank.refunds };
    log(`answer: ${JSON.stringify(result.answer)}`);
    return result;
  } finally {
    await service.stop();
    await bank.close();
    await restate.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What went wrong with the refunds: paid other than once. */
export function checkRefunds(run: RefundRun): string[] {
  return run.refunds.length === 1
    ? []
    : [`the refund was paid ${run.refunds.length} times (expected once)`];
}
