/**
 * One worker process of the shop: DBOS with its system database on PostgreSQL, the checkout
 * workflow (charge, then ship), the charge an `idempotentStep`. `CRASH=after-charge` kills the
 * process right after the bank took the charge (before the outcome was stored or DBOS
 * checkpointed the step); `CRASH=after-stored` right after the outcome was stored (before DBOS
 * checkpointed the step). Without `CRASH`, DBOS.launch() recovers the workflows left pending.
 * Prints the workflow's result (or error) as a JSON line.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { createIdempotency, currentExecutionContext, idempotentStep } from '@idempotent-tools/dbos';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { type Order, openBank } from './bank.js';

const { SYSTEM_DATABASE_URL, STORE_FILE, BANK_FILE, WORKFLOW_ID, ORDER, CRASH } = process.env;
if (!SYSTEM_DATABASE_URL || !STORE_FILE || !BANK_FILE || !WORKFLOW_ID || !ORDER) {
  throw new Error('worker.ts is started by main.ts (src/shop.ts), with its environment');
}
const die = () => process.kill(process.pid, 'SIGKILL');
const bank = openBank(BANK_FILE);

const idempotency = createIdempotency({
  store: openSqliteStore(STORE_FILE),
  lease: 1_000, // short, for the demo: a dead attempt is found stale a second later
  onEvent: (event) => {
    if (CRASH === 'after-stored' && event.outcome === 'executed') die();
  },
});
const charge = idempotentStep(
  'charge',
  (order: Order) => {
    // The key is the same on every re-run of this step: the bank's Idempotency-Key.
    const receipt = bank.charge(order, currentExecutionContext()?.key ?? '');
    if (CRASH === 'after-charge') die();
    return receipt;
  },
  {
    idempotency,
    policy: {
      // An attempt died mid-way: ask the bank whether it took a charge with this key.
      reconcile: async ({ key }) => {
        const found = bank.find(key);
        return found === undefined ? { found: false } : { found: true, value: found };
      },
    },
  },
);
const ship = DBOS.registerStep(async (order: Order) => `shipped ${order.id}`, { name: 'ship' });
const checkout = DBOS.registerWorkflow(
  async (order: Order) => {
    const receipt = await charge(order);
    return { chargeId: receipt.chargeId, shipped: await ship(order) };
  },
  { name: 'checkout' },
);

DBOS.setConfig({ name: 'shop', systemDatabaseUrl: SYSTEM_DATABASE_URL, logLevel: 'error' });
await DBOS.launch(); // recovers this executor's pending workflows
const handle = CRASH
  ? await DBOS.startWorkflow(checkout, { workflowID: WORKFLOW_ID })(JSON.parse(ORDER) as Order)
  : DBOS.retrieveWorkflow<Awaited<ReturnType<typeof checkout>>>(WORKFLOW_ID);
try {
  console.log(JSON.stringify({ result: await handle.getResult() }));
} catch (error) {
  console.log(JSON.stringify({ error: (error as Error).message }));
}
await DBOS.shutdown();
