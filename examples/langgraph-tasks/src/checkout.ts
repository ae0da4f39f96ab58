/**
 * A checkout on LangGraph's functional API: an approval interrupt before the charge, the charge
 * an idempotent task, then shipping (down at the first try). Each order is a thread.
 */

import { type IdempotencyStore, idempotentTask } from '@idempotent-tools/langgraph';
import { Command, entrypoint, interrupt, MemorySaver } from '@langchain/langgraph';

export interface Order {
  id: string;
  amount: number;
}
export interface Charge {
  chargeId: string;
  orderId: string;
  amount: number;
}

/** The payment provider: every charge it took (the side effect counted). */
export function createBank() {
  const charges: Charge[] = [];
  return {
    charges,
    async charge(order: Order): Promise<Charge> {
      const charge = {
        chargeId: `ch_${charges.length + 1}`,
        orderId: order.id,
        amount: order.amount,
      };
      charges.push(charge);
      return charge;
    },
  };
}

/** The demo: prints its transcript through `log`, returns what the bank took. */
export async function runDemo(input: { store: IdempotencyStore; log: (line: string) => void }) {
  const bank = createBank();
  const { log } = input;
  const charge = idempotentTask('charge', (order: Order) => bank.charge(order), {
    store: input.store,
  });
  let shippingDown = true; // the first shipping call fails: a failure after the charge
  const checkout = entrypoint(
    { name: 'checkout', checkpointer: new MemorySaver() },
    async (order: Order) => {
      const approved = interrupt({ question: `charge $${order.amount} for ${order.id}?` });
      if (approved !== true) return { status: 'rejected' };
      const receipt = await charge(order);
      if (shippingDown) {
        shippingDown = false;
        throw new Error('shipping service down');
      }
      return { status: 'shipped', chargeId: receipt.chargeId };
    },
  );

  const run = async (order: Order) => {
    const config = { configurable: { thread_id: `order-${order.id}` } };
    const paused = (await checkout.invoke(order, config)) as {
      __interrupt__?: { value: { question: string } }[];
    };
    log(`${order.id}: approval asked: ${paused.__interrupt__?.[0]?.value.question}`);
    try {
      const done = await checkout.invoke(new Command({ resume: true }), config);
      log(`${order.id}: approved -> ${JSON.stringify(done)}`);
    } catch (error) {
      log(`${order.id}: approved, then ${(error as Error).message}; retrying the whole checkout`);
      let done: unknown = await checkout.invoke(order, config);
      // LangGraph 1.7 keeps the approval given to this thread; other versions may ask again.
      if ((done as { __interrupt__?: unknown }).__interrupt__ !== undefined) {
        done = await checkout.invoke(new Command({ resume: true }), config);
      }
      log(`${order.id}: retried -> ${JSON.stringify(done)} (the charge replayed, not repeated)`);
    }
  };

  await run({ id: 'o-1', amount: 40 }); // shipping fails once: the retry replays the charge
  await run({ id: 'o-2', amount: 40 }); // same amount, another order: charged again
  for (const c of bank.charges) log(`bank: ${c.chargeId} ${c.orderId} $${c.amount}`);
  return bank.charges;
}

/** The effects this demo must leave: one charge per order, none twice, none missing. */
export function checkEffects(charges: readonly Charge[]): string[] {
  const problems: string[] = [];
  for (const id of ['o-1', 'o-2']) {
    const n = charges.filter((c) => c.orderId === id).length;
    if (n !== 1) problems.push(`order ${id} was charged ${n} times (expected once)`);
  }
  return problems;
}
