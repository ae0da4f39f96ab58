/**
 * The workflows, built by the Workflow SDK's compiler (`"use workflow"` / `"use step"`): a
 * checkout whose `charge` step pays at the bank (`BANK`, an HTTP API that takes an
 * `Idempotency-Key` and does not deduplicate) through `idempotentStep`, and the same checkout
 * with a plain step (the comparison). With `CRASH_AFTER_CHARGE=1` the worker kills itself
 * (SIGKILL) after the bank charged (and, in `idempotentStep`, its outcome was stored) and before
 * the step returned, so the engine never recorded it: the next worker runs the step again.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { idempotentStep } from '@idempotent-tools/workflow';

export type Order = { orderId: string; amount: number };
export type Charge = { chargeId: string; amount: number };

const env = (name: string) => process.env[name] ?? '';
/** The crash point: the charge done, the engine not told yet (first worker only). */
const crashAfterCharge = () => {
  if (env('CRASH_AFTER_CHARGE') === '1') process.kill(process.pid, 'SIGKILL');
};

async function payCharge(order: Order, headers: Record<string, string>): Promise<Charge> {
  const res = await fetch(`${env('BANK')}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ amount: order.amount, orderId: order.orderId }),
  });
  return (await res.json()) as Charge;
}

// The store outlives the worker: the next worker finds the charge the killed one stored.
const charge = idempotentStep(
  'charge',
  (order: Order, ctx) => payCharge(order, { 'Idempotency-Key': ctx.key }),
  { store: openSqliteStore(env('DB') || '.demo-data/idempotency.sqlite') },
);

async function chargeStep(order: Order) {
  'use step';
  const receipt = await charge(order); // a re-run of this step replays the first charge
  crashAfterCharge();
  return receipt;
}

async function plainChargeStep(order: Order) {
  'use step';
  const receipt = await payCharge(order, {});
  crashAfterCharge();
  return receipt;
}

export async function checkout(order: Order) {
  'use workflow';
  return { status: 'charged', ...(await chargeStep(order)) };
}

export async function plainCheckout(order: Order) {
  'use workflow';
  return { status: 'charged', ...(await plainChargeStep(order)) };
}
