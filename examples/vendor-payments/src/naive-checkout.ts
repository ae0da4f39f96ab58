/**
 * The negative control of the crash matrix (used by the tests only): the same checkout without
 * the safeguards. PayCo gets no `Idempotency-Key` and the bank is called directly, not through
 * the ledger, while a stale call is still re-executed. Killed at the wrong moment, it pays twice.
 */
import type { CheckoutArgs, CheckoutResult, Step } from './checkout.js';
import { type Charge, PAYCO_API_KEY, type Transfer } from './vendors.js';

export function naiveCheckoutTool(options: {
  paycoUrl: string;
  bankUrl: string;
  step?: (step: Step) => void;
}) {
  const { paycoUrl, bankUrl, step = () => {} } = options;
  const post = async <T>(url: string, body: unknown): Promise<T> => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${PAYCO_API_KEY}` },
      body: JSON.stringify(body),
    });
    return (await response.json()) as T;
  };
  return async (args: CheckoutArgs): Promise<CheckoutResult> => {
    step('payco:before-call');
    const charge = await post<Charge>(`${paycoUrl}/v1/charges`, {
      amount: args.amount,
      currency: 'eur',
      customer: args.customer,
      description: `order ${args.order}`,
    });
    step('payco:after-reply');
    step('bank:before-call');
    const transfer = await post<Transfer>(`${bankUrl}/transfers`, {
      amount: args.payout,
      to: args.supplier,
      reference: `order ${args.order}`,
      memo: `order ${args.order}`,
    });
    step('bank:after-reply');
    step('tool:after-return');
    return { order: args.order, charge: charge.id, transfer: transfer.id };
  };
}
