/**
 * The agent's `checkout` tool: charge the customer at PayCo, pay the supplier at LegacyBank.
 *
 * - PayCo dedupes by `Idempotency-Key` (its API is served with `idempotentHandler`):
 *   `idempotentFetch({ headerFormat: 'sf-string' })` sends the tool call's key (derived per
 *   request) as the IETF draft writes it, `"v1_..."`, the same on every re-execution, so PayCo
 *   replays instead of charging again.
 * - LegacyBank does not: the transfer goes through the ledger (`idempotency.vendorCall`), with the
 *   ledger key as the bank reference, and `reconcile` looks a lost transfer up by that reference.
 *
 * Both vendor calls are deduped by our key, so the tool declares `vendorDedupes: true` and a
 * stale call (its agent died mid-way) may run again: `onStale: 'reexecute'`.
 */
import {
  type ExecutionContext,
  type Idempotency,
  idempotentFetch,
  type Reconciliation,
  type ToolPolicy,
} from '@idempotent-tools/core';
import { type Charge, PAYCO_API_KEY, type Transfer } from './vendors.js';

export interface CheckoutArgs {
  order: string;
  customer: string;
  amount: number;
  supplier: string;
  payout: number;
}

export interface CheckoutResult {
  order: string;
  charge: string;
  transfer: string;
}

/** Where the agent process may be killed, in the order a checkout reaches them. */
export const STEPS = [
  'payco:before-call',
  'payco:received',
  'payco:after-reply',
  'bank:before-call',
  'bank:received',
  'bank:after-reply',
  'tool:after-return',
  'after-persist',
] as const;
export type Step = (typeof STEPS)[number];

/** A vendor answered with an error status. */
export class VendorError extends Error {
  constructor(
    readonly vendor: string,
    readonly status: number,
    body: string,
  ) {
    super(`${vendor} answered ${status}: ${body}`);
    this.name = 'VendorError';
  }
}

export async function json<T>(vendor: string, response: Response): Promise<T> {
  const text = await response.text();
  if (!response.ok) throw new VendorError(vendor, response.status, text);
  return JSON.parse(text) as T;
}

/** The checkout tool's policy: re-execute a stale call, since every vendor call is deduped. */
export const checkoutPolicy: ToolPolicy<CheckoutArgs, CheckoutResult> = {
  onStale: 'reexecute',
  vendorDedupes: true,
};

export function checkoutTool(options: {
  idempotency: Idempotency;
  paycoUrl: string;
  bankUrl: string;
  /** Called at each step; the crash matrix kills the process there. */
  step?: (step: Step) => void;
}) {
  const { idempotency, paycoUrl, bankUrl, step = () => {} } = options;
  // Idempotency-Key on every POST made while a tool runs, as an RFC 8941 String ("v1_...").
  const payco = idempotentFetch({ headerFormat: 'sf-string' });

  /** Did the bank make the transfer with this reference? `undefined`: cannot tell. */
  const findTransfer = async ({ key }: { key: string }): Promise<Reconciliation<Transfer>> => {
    const response = await fetch(`${bankUrl}/transfers?reference=${encodeURIComponent(key)}`);
    if (!response.ok) return undefined;
    const [transfer] = (await response.json()) as Transfer[];
    return transfer === undefined ? { found: false } : { found: true, value: transfer };
  };

  return async (args: CheckoutArgs, ctx: ExecutionContext): Promise<CheckoutResult> => {
    step('payco:before-call');
    const charge = await json<Charge>(
      'PayCo',
      await payco(`${paycoUrl}/v1/charges`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PAYCO_API_KEY}` },
        body: JSON.stringify({
          amount: args.amount,
          currency: 'eur',
          customer: args.customer,
          description: `order ${args.order}`,
        }),
      }),
    );
    step('payco:after-reply');

    const { value: transfer } = await idempotency.vendorCall(
      ctx,
      'bank.transfer',
      async (vendor) => {
        step('bank:before-call'); // the ledger's pending row is written; the bank not called yet
        const result = await json<Transfer>(
          'LegacyBank',
          await fetch(`${bankUrl}/transfers`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              amount: args.payout,
              to: args.supplier,
              reference: vendor.key, // the ledger key: reconcile finds the transfer by it
              memo: `order ${args.order}`,
            }),
            signal: vendor.signal,
          }),
        );
        step('bank:after-reply');
        return result;
      },
      { reconcile: findTransfer },
    );
    step('tool:after-return');
    return { order: args.order, charge: charge.id, transfer: transfer.id };
  };
}
