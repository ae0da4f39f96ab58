/**
 * The agent's `refund` tool, with a person in the loop: a refund above `APPROVAL_ABOVE` runs only
 * once a person approved this exact call (`createApprovals`, on the same store as the calls).
 *
 * - The agent asks (`requestApproval`, made by `approvals.run` when there is none yet) and the
 *   call waits for the decision; the approver decides from anywhere (another process, a UI):
 *   `approve(key, { by })`. An approval sent twice is one approval.
 * - Once approved the refund runs through the executor: once, from any process, a retry replays.
 * - The approval is bound to the call's arguments: one given for 60.00 does not authorise 65.00
 *   (`DriftError`, nothing runs).
 *
 * PayCo dedupes by `Idempotency-Key`, so a refund whose agent died mid-way may run again
 * (`onStale: 'reexecute', vendorDedupes: true`); `onReplay` tells a replay when the refund ran.
 */
import {
  ApprovalPendingError,
  type Approvals,
  type Call,
  type Idempotency,
  type IdempotentResult,
  idempotentFetch,
  type ToolPolicy,
} from '@idempotent-tools/core';
import { json } from './checkout.js';
import { PAYCO_API_KEY, type Refund } from './vendors.js';

export interface RefundArgs {
  order: string;
  /** PayCo's charge to refund. */
  charge: string;
  /** In cents. */
  amount: number;
}

export interface RefundResult {
  order: string;
  refund: string;
  amount: number;
  /** On a replay only: when the refund ran (ISO time), added by `onReplay`. */
  refundedAt?: string;
}

/** Refunds above this (in cents) need a person's approval. */
export const APPROVAL_ABOVE = 5000;

export const needsApproval = (args: RefundArgs) => args.amount > APPROVAL_ABOVE;

export const refundPolicy: ToolPolicy<RefundArgs, RefundResult> = {
  onStale: 'reexecute',
  vendorDedupes: true,
  // A replay says when the refund ran; the stored outcome stays as it was.
  onReplay: (value, ctx) => ({ ...value, refundedAt: new Date(ctx.createdAt).toISOString() }),
};

export function refundTool(options: { paycoUrl: string }) {
  const payco = idempotentFetch({ headerFormat: 'sf-string' });
  return async (args: RefundArgs): Promise<RefundResult> => {
    const refund = await json<Refund>(
      'PayCo',
      await payco(`${options.paycoUrl}/v1/refunds`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PAYCO_API_KEY}` },
        body: JSON.stringify({
          charge: args.charge,
          amount: args.amount,
          metadata: `order ${args.order}`,
        }),
      }),
    );
    return { order: args.order, refund: refund.id, amount: refund.amount };
  };
}

export interface RunRefundOptions {
  /** The approval the model's resumed call says it has (from the approval UI's answer). */
  approvalKey?: string | undefined;
  /** The approval was asked for: tell the approver (a UI, a chat message) its key. */
  onApprovalRequested?: (approvalKey: string) => void;
  /** The approver decided; the call is about to run (the example kills an agent here). */
  onDecided?: (status: string) => void;
  /** How long the call waits for a decision before the model is told it is pending. @default 60000 */
  maxWait?: number;
}

/**
 * Run one refund call: at once when it is small, else once a person approved it, waiting for the
 * decision. Throws what the model should read: `ApprovalPendingError` (still waiting),
 * `ApprovalRejectedError`, `DriftError` (an approval for other arguments), or the tool's error.
 */
export async function runRefund(
  deps: { idempotency: Idempotency; approvals: Approvals },
  call: Call<RefundArgs>,
  refund: (args: RefundArgs) => Promise<RefundResult>,
  options: RunRefundOptions = {},
): Promise<IdempotentResult<RefundResult>> {
  const { idempotency, approvals } = deps;
  if (!needsApproval(call.args)) return idempotency.run(call, refund, refundPolicy);
  const deadline = Date.now() + (options.maxWait ?? 60_000);
  let told = false;
  for (;;) {
    try {
      const { approval: _, ...result } = await approvals.run(call, refund, refundPolicy, {
        approvalKey: options.approvalKey,
      });
      return result;
    } catch (error) {
      if (!ApprovalPendingError.isInstance(error) || Date.now() > deadline) throw error;
      if (!told) options.onApprovalRequested?.(error.approvalKey);
      told = true;
      // Wait for the decision (a person takes seconds to hours: a poll is fine here).
      let approval = await approvals.getApproval(error.approvalKey);
      while (approval?.status === 'pending' && Date.now() <= deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        approval = await approvals.getApproval(error.approvalKey);
      }
      if (approval !== undefined && approval.status !== 'pending') {
        options.onDecided?.(approval.status);
      }
    }
  }
}
