/**
 * The demo: for each order, a worker process starts the checkout workflow and is killed inside
 * the charge step; a new worker process lets DBOS recover the workflow. The charge is not run
 * again: replayed from the idempotency store, or found at the bank by its Idempotency-Key.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { type Charge, type Order, openBank } from './bank.js';

const worker = fileURLToPath(new URL('./worker.ts', import.meta.url));

function runWorker(env: Record<string, string>) {
  return new Promise<{ signal: NodeJS.Signals | null; reply: string }>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--disable-warning=DeprecationWarning', '--import', 'tsx', worker],
      {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let stdout = '';
    child.stdout.on('data', (chunk) => {
      stdout += String(chunk);
    });
    child.on('error', reject);
    child.on('exit', (_code, signal) =>
      resolve({ signal, reply: stdout.trim().split('\n').at(-1) ?? '' }),
    );
  });
}

/**
 * Run the demo against the PostgreSQL at `databaseUrl` (a throwaway DBOS system database is
 * created there and dropped after); the bank's charges.
 */
export async function runDemo(options: {
  databaseUrl: string;
  log: (line: string) => void;
}): Promise<{ charges: Charge[]; orders: Order[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'dbos-workflow-'));
  const database = `dbos_example_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const systemUrl = new URL(options.databaseUrl);
  systemUrl.pathname = `/${database}`;
  const admin = new pg.Client({ connectionString: options.databaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const bank = openBank(join(dir, 'bank.jsonl'));
  const env = {
    SYSTEM_DATABASE_URL: systemUrl.href,
    STORE_FILE: join(dir, 'idempotency.sqlite'),
    BANK_FILE: join(dir, 'bank.jsonl'),
  };
  const orders: Order[] = [
    { id: 'o-1', amount: 40 },
    { id: 'o-2', amount: 25 },
  ];
  const crashes = [
    ['after-stored', 'killed after the charge was stored, before DBOS checkpointed the step'],
    ['after-charge', 'killed right after the bank took the charge'],
  ] as const;
  try {
    for (const [index, order] of orders.entries()) {
      const [crash, what] = crashes[index] ?? crashes[0];
      const run = { ...env, WORKFLOW_ID: `checkout-${order.id}`, ORDER: JSON.stringify(order) };
      const first = await runWorker({ ...run, CRASH: crash });
      options.log(`${order.id}: worker ${what} (${first.signal})`);
      const recovered = await runWorker(run);
      options.log(`${order.id}: a new worker's DBOS recovered the workflow -> ${recovered.reply}`);
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
  const charges = bank.charges();
  rmSync(dir, { recursive: true, force: true });
  for (const c of charges) options.log(`bank: ${c.chargeId} ${c.orderId} ${c.amount}`);
  return { charges, orders };
}
