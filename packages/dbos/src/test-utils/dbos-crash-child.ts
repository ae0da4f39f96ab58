/**
 * A DBOS worker for the crash tests, one process per run. `MODE=start` starts workflow
 * `WORKFLOW_ID` (charge, then ship) and SIGKILLs itself inside the charge: right after the
 * vendor's effect (`CRASH=after-effect`: the outcome is never stored) or right after the outcome
 * was stored and before DBOS checkpoints the step (`CRASH=after-persist`). `MODE=recover`
 * launches DBOS, which recovers the pending workflow, and prints what it came back with.
 * `STEP=plain` charges in a plain `DBOS.registerStep` (the control: no lookup).
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createIdempotency, currentExecutionContext, idempotentStep } from '../index.js';

const env = process.env as {
  [name in 'MODE' | 'CRASH' | 'STEP' | 'RECONCILE' | 'LEASE_MS']?: string;
} & { [name in 'EFFECTS_FILE' | 'SQLITE_FILE' | 'SYSTEM_DATABASE_URL' | 'WORKFLOW_ID']: string };
const die = () => process.kill(process.pid, 'SIGKILL');
const crashing = env.MODE === 'start';
type Order = { id: string; amount: number };

/** The vendor: one line per charge made, with the Idempotency-Key it was sent. */
function vendorCharge(order: Order, idempotencyKey: string | undefined) {
  appendFileSync(env.EFFECTS_FILE, `${JSON.stringify({ order: order.id, idempotencyKey })}\n`);
  if (crashing && env.CRASH === 'after-effect') die();
  return { chargeId: `ch_${order.id}`, idempotencyKey };
}
const charges = (): { idempotencyKey?: string }[] =>
  existsSync(env.EFFECTS_FILE)
    ? readFileSync(env.EFFECTS_FILE, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];

const idempotency = createIdempotency({
  store: openSqliteStore(env.SQLITE_FILE),
  lease: Number(env.LEASE_MS),
  onEvent: (event) => {
    if (crashing && env.CRASH === 'after-persist' && event.outcome === 'executed') die();
  },
});

const charge =
  env.STEP === 'plain'
    ? DBOS.registerStep(async (order: Order) => vendorCharge(order, undefined), { name: 'charge' })
    : idempotentStep(
        'charge',
        (order: Order) => vendorCharge(order, currentExecutionContext()?.key),
        {
          idempotency,
          policy: {
            ...(env.RECONCILE === '1'
              ? {
                  reconcile: async ({ key }) => {
                    const found = charges().find((c) => c.idempotencyKey === key);
                    return found === undefined
                      ? { found: false }
                      : { found: true, value: { chargeId: 'ch_reconciled', idempotencyKey: key } };
                  },
                }
              : {}),
          },
        },
      );
const ship = DBOS.registerStep(async (order: Order) => `shipped ${order.id}`, { name: 'ship' });
const checkout = DBOS.registerWorkflow(
  async (order: Order) => {
    const receipt = await charge(order);
    return { receipt, shipped: await ship(order) };
  },
  { name: 'checkout' },
);

DBOS.setConfig({
  name: 'dbos-crash-test',
  systemDatabaseUrl: env.SYSTEM_DATABASE_URL,
  logLevel: 'error',
});
await DBOS.launch(); // recovers this executor's pending workflows
const order: Order = { id: 'o-1', amount: 40 };
const handle =
  env.MODE === 'start'
    ? await DBOS.startWorkflow(checkout, { workflowID: env.WORKFLOW_ID })(order)
    : DBOS.retrieveWorkflow<Awaited<ReturnType<typeof checkout>>>(env.WORKFLOW_ID);
try {
  process.stdout.write(`${JSON.stringify({ value: await handle.getResult() })}\n`);
} catch (error) {
  const { name, code, message } = error as { name?: string; code?: string; message?: string };
  process.stdout.write(`${JSON.stringify({ error: { name, code, message } })}\n`);
}
await DBOS.shutdown();
