import { appendFileSync } from 'node:fs';
import { countEffects } from '@idempotent-tools/testing';
import { type BaseCheckpointSaver, entrypoint, interrupt } from '@langchain/langgraph';
import { type IdempotentTaskOptions, idempotentTask } from '../index.js';

export interface Order {
  id: string;
  amount: number;
}

/**
 * The checkout workflow of the crash tests, shared by the child that dies and the parent that
 * resumes: an approval interrupt, then the charge (a line appended to `effectsFile`).
 */
export function checkout(input: {
  checkpointer: BaseCheckpointSaver;
  effectsFile: string;
  options: IdempotentTaskOptions<[Order], { chargeId: string; amount: number }>;
  /** Called right after the side effect (the child SIGKILLs itself there). */
  afterEffect?: () => void;
}) {
  const charge = idempotentTask(
    'charge',
    async (order: Order) => {
      appendFileSync(input.effectsFile, `${order.id} ${order.amount}\n`);
      input.afterEffect?.();
      return { chargeId: `ch_${countEffects(input.effectsFile)}`, amount: order.amount };
    },
    input.options,
  );
  return entrypoint(
    { name: 'checkout', checkpointer: input.checkpointer },
    async (order: Order) => {
      const approved = interrupt({ approve: order });
      if (approved !== true) return { status: 'rejected' as const };
      return { status: 'charged' as const, receipt: await charge(order) };
    },
  );
}
