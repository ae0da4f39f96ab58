import { appendFileSync } from 'node:fs';
import type { Idempotency } from '@idempotent-tools/core';
import { countEffects } from '@idempotent-tools/testing';
import { type BaseCheckpointSaver, entrypoint } from '@langchain/langgraph';
import { approvalTask, idempotentTask } from '../index.js';

export interface Order {
  id: string;
  amount: number;
}

/**
 * The checkout of the approval tests, shared by the child process and the parent that resumes:
 * the charge (an approval task: a line appended to `chargesFile`) and, in parallel, the shipping
 * label (an idempotent task, no approval: a line in `labelsFile`).
 */
export function approvalCheckout(input: {
  checkpointer: BaseCheckpointSaver;
  idempotency: Idempotency;
  chargesFile: string;
  labelsFile: string;
  /** Called right after the charge's side effect. */
  afterCharge?: () => void;
}) {
  const { idempotency } = input;
  const charge = approvalTask(
    'charge',
    async (order: Order) => {
      appendFileSync(input.chargesFile, `${order.id} ${order.amount}\n`);
      input.afterCharge?.();
      return { chargeId: `ch_${countEffects(input.chargesFile)}`, amount: order.amount };
    },
    {
      idempotency,
      description: (order) => `Charge ${order.amount} EUR for order ${order.id}`,
      onRejected: (approval) => ({
        rejected: true as const,
        by: approval.by,
        reason: approval.reason,
      }),
    },
  );
  const label = idempotentTask(
    'label',
    async (order: Order) => {
      appendFileSync(input.labelsFile, `${order.id}\n`);
      return { label: `L-${order.id}` };
    },
    { idempotency },
  );
  return entrypoint(
    { name: 'checkout', checkpointer: input.checkpointer },
    async (order: Order) => {
      const [receipt, shipping] = await Promise.all([charge(order), label(order)]);
      return { receipt, shipping };
    },
  );
}
