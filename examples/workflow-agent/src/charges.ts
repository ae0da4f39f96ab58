/**
 * The whole run, offline: the workflows built by the Workflow SDK's compiler (once per process,
 * into `.demo-data/`), a bank (an HTTP API in this process that counts charges) on 127.0.0.1,
 * and the worker (`src/worker.ts`) in a child process on the local world in a fresh folder:
 * the first worker is killed after the charge, a second one resumes the run.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildWorkflowTests } from '@workflow/vitest';

const exampleDir = fileURLToPath(new URL('..', import.meta.url));
const workflowsDir = fileURLToPath(new URL('./workflows', import.meta.url));
const workerModule = fileURLToPath(new URL('./worker.ts', import.meta.url));
// Inside the example: the built bundles import `workflow` and our packages from its node_modules.
const dataDir = join(exampleDir, '.demo-data');

let built: Promise<string> | undefined;
/** Builds the workflow and step bundles (the SDK's compiler) once; the folder they are in. */
function buildWorkflows(): Promise<string> {
  built ??= (async () => {
    mkdirSync(dataDir, { recursive: true });
    const dir = mkdtempSync(join(dataDir, 'build-'));
    await buildWorkflowTests({
      cwd: workflowsDir,
      dataDir: join(dir, 'build-data'),
      outDir: join(dir, 'out'),
    });
    return dir;
  })();
  return built.then((dir) => join(dir, 'out'));
}

/** Removes the built bundles (call when done with `runCheckout`). */
export async function removeBuild(): Promise<void> {
  const dir = await built?.catch(() => undefined);
  built = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/** A bank: `POST /charges` charges (an effect) and records the request's Idempotency-Key. */
async function startBank() {
  const charges: Array<{ chargeId: string; amount: number; key: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += String(chunk)));
    req.on('end', () => {
      const { amount } = JSON.parse(body || '{}') as { amount: number };
      const charge = { chargeId: `ch_${charges.length + 1}`, amount };
      charges.push({ ...charge, key: String(req.headers['idempotency-key'] ?? '(none)') });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(charge));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    charges,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type Line = { run?: string; result?: unknown; error?: string; status?: string };

/** One worker process; resolves with how it ended and the JSON lines it printed. */
function worker(args: string[], env: Record<string, string>) {
  return new Promise<{ ended: string | number | null; lines: Line[]; stderr: string }>(
    (resolve, reject) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', '--disable-warning=ExperimentalWarning', workerModule, ...args],
        { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += String(chunk)));
      child.stderr.on('data', (chunk) => (stderr += String(chunk)));
      child.on('error', reject);
      child.on('close', (code, signal) => {
        const lines = stdout
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as Line);
        resolve({ ended: signal ?? code, lines, stderr });
      });
    },
  );
}

export interface ChargeRun {
  /** The run's id (`wrun_…`). */
  runId: string;
  /** How the first worker ended (`SIGKILL`). */
  killed: string | number | null;
  /** What the run returned, in the second worker. */
  result: unknown;
  /** The charges the bank made, with the Idempotency-Key of each request. */
  charges: Array<{ chargeId: string; amount: number; key: string }>;
}

/**
 * One checkout run whose worker is killed after the bank charged and before the engine recorded
 * the step, resumed by a second worker: `plain` charges in a plain `"use step"` function.
 */
export async function runCheckout(options: {
  plain: boolean;
  log?: (line: string) => void;
}): Promise<ChargeRun> {
  const log = options.log ?? (() => {});
  const out = await buildWorkflows();
  const dir = mkdtempSync(join(dataDir, 'run-'));
  const bank = await startBank();
  const env = {
    WF_OUT: out,
    WF_DATA: join(dir, 'world'),
    BANK: bank.url,
    DB: join(dir, 'idempotency.sqlite'),
  };
  try {
    const workflow = options.plain ? 'plainCheckout' : 'checkout';
    const order = { orderId: 'ord_1', amount: 42 };
    log(`worker 1 starts ${workflow}(${JSON.stringify(order)}) on the local world`);
    const first = await worker(['start', workflow, JSON.stringify(order)], {
      ...env,
      CRASH_AFTER_CHARGE: '1',
    });
    const runId = first.lines.find((line) => line.run)?.run;
    if (first.ended !== 'SIGKILL' || !runId) {
      throw new Error(
        `worker 1 was to be killed mid-run, it ended ${first.ended}: ${first.stderr}`,
      );
    }
    log(
      `worker 1 was killed (${first.ended}) after the bank charged, before the engine recorded the step`,
    );
    const second = await worker(['resume', runId], env);
    const last = second.lines.at(-1);
    if (second.ended !== 0 || !last || last.error !== undefined || !('result' in last)) {
      throw new Error(`worker 2 did not finish ${runId}: ${JSON.stringify(last)} ${second.stderr}`);
    }
    log(`worker 2 resumed ${runId}: the engine ran the step again`);
    log(`result: ${JSON.stringify(last.result)}`);
    return { runId, killed: first.ended, result: last.result, charges: [...bank.charges] };
  } finally {
    await bank.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What went wrong with the charges: made other than once. */
export function checkCharges(run: ChargeRun): string[] {
  return run.charges.length === 1
    ? []
    : [`the order was charged ${run.charges.length} times (expected once)`];
}
