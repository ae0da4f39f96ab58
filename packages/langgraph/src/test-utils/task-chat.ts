import { appendFileSync } from 'node:fs';
import type { Idempotency } from '@idempotent-tools/core';
import { countEffects } from '@idempotent-tools/testing';
import { type BaseCheckpointSaver, entrypoint } from '@langchain/langgraph';
import { idempotentTask } from '../index.js';

/** One run of the chat workflow: what the user said, and how the run ends. */
export interface ChatInput {
  text: string;
  /** The run returns nothing (`undefined`). */
  quiet?: boolean;
  /** The run fails after the task ran (the reply is lost). */
  lose?: boolean;
}

/**
 * The workflow of the LangGraph identity cases, shared by this process and the child that runs a
 * turn in another: `carry_out` (an idempotent task: a line appended to `effectsFile`) with the
 * user's words, then the receipt, or nothing, or a failure after the effect.
 */
export function chatWorkflow(input: {
  /** @default none (the graph keeps no checkpoints) */
  checkpointer?: BaseCheckpointSaver | undefined;
  idempotency: Idempotency;
  effectsFile: string;
}) {
  const carryOut = idempotentTask(
    'carry_out',
    async (text: string) => {
      appendFileSync(input.effectsFile, `${text}\n`);
      return { done: text, receipt: `R-${countEffects(input.effectsFile)}` };
    },
    { idempotency: input.idempotency },
  );
  const { checkpointer } = input;
  const options = { name: 'chat', ...(checkpointer === undefined ? {} : { checkpointer }) };
  return entrypoint(options, async (run: ChatInput) => {
    const receipt = await carryOut(run.text);
    if (run.lose === true) throw new Error('the connection dropped before the reply was sent');
    return run.quiet === true ? undefined : { receipt };
  });
}
