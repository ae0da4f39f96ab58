import { appendFileSync } from 'node:fs';
import { createOpenAI } from '@ai-sdk/openai';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/openai';
import { generateText, isStepCount, tool } from 'ai';
import { z } from 'zod';
import { idempotentTools } from '../index.js';

export type Crash = 'after-effect' | 'after-persist' | undefined;

/** The scripted model of the crash tests: charge once per turn, then answer. */
export function chargeModel(turn: ModelTurn): ScriptedReply {
  return turn.toolOutputs.length === 0
    ? { toolCalls: [{ name: 'charge_card', arguments: { amount: 1999, currency: 'usd' } }] }
    : { content: 'Charged.' };
}

/**
 * One turn of an agent that charges a card (side effect: a line in `effectsFile`) on a SQLite
 * store, through the real `@ai-sdk/openai` client against the scripted server at `baseURL`;
 * `crash` SIGKILLs the process right after the side effect, or after its outcome is stored.
 */
export async function runChargeAgent(options: {
  baseURL: string;
  dbPath: string;
  effectsFile: string;
  crash: Crash;
}) {
  const store = openSqliteStore(options.dbPath);
  const chargeCard = tool({
    description: 'Charge a card.',
    inputSchema: z.object({ amount: z.number(), currency: z.string() }),
    execute: async ({ amount, currency }) => {
      appendFileSync(options.effectsFile, `${amount} ${currency} pid=${process.pid}\n`);
      if (options.crash === 'after-effect') process.kill(process.pid, 'SIGKILL');
      return { chargeId: `ch_${process.pid}`, amount };
    },
  });
  const tools = idempotentTools(
    { charge_card: chargeCard },
    { store, conversationId: 'chat-order-1001', lease: 1_000 },
  );
  const openai = createOpenAI({ baseURL: options.baseURL, apiKey: 'test' });
  try {
    const result = await generateText({
      model: openai.chat('gpt-4o-mini'),
      tools,
      prompt: 'Charge my card $19.99.',
      stopWhen: isStepCount(5),
      onToolExecutionEnd: () => {
        // The outcome is stored before execute returns: die before the answer is used.
        if (options.crash === 'after-persist') process.kill(process.pid, 'SIGKILL');
      },
    });
    return result.steps.flatMap((step) =>
      step.content.flatMap((part) =>
        part.type === 'tool-result'
          ? [part.output]
          : part.type === 'tool-error'
            ? [part.error]
            : [],
      ),
    );
  } finally {
    store.close();
  }
}
