/**
 * The vendor: a bank that keeps its charges in a file (one JSON line each), so every process of
 * the demo sees the same ledger. It can look a charge up by the Idempotency-Key it was sent.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';

export type Order = { id: string; amount: number };
export type Charge = { chargeId: string; orderId: string; amount: number; idempotencyKey: string };

export function openBank(file: string) {
  const charges = (): Charge[] =>
    existsSync(file)
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Charge)
      : [];
  return {
    charges,
    charge(order: Order, idempotencyKey: string): Charge {
      const charge = {
        chargeId: `ch_${charges().length + 1}`,
        orderId: order.id,
        amount: order.amount,
        idempotencyKey,
      };
      appendFileSync(file, `${JSON.stringify(charge)}\n`);
      return charge;
    },
    /** The charge sent with this Idempotency-Key, if the bank took one. */
    find: (idempotencyKey: string) => charges().find((c) => c.idempotencyKey === idempotencyKey),
  };
}

/** What went wrong with the charges: each order once, none twice, none missing. */
export function checkEffects(charges: Charge[], orders: Order[]): string[] {
  return orders.flatMap((order) => {
    const n = charges.filter((c) => c.orderId === order.id).length;
    return n === 1 ? [] : [`order ${order.id} was charged ${n} times (expected once)`];
  });
}
