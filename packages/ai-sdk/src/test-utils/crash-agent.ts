import { appendFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { generateText, isStepCount, tool } from 'ai';
import { z } from 'zod';
import { idempotentTools } from '../index.js';
import { scriptedModel } from './script-model.js';

export type Crash = 'after-effect' | 'after-persist' | undefined;

/**
 * One turn of an agent that charges a card (side effect: a line in `effectsFile`) on a SQLite
 * store; `crash` SIGKILLs the process right after the side effect, or after its outcome is stored.
 */
export async function runChargeAgent(options: {
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
  const tools = idempotentTools({ charge_card: chargeCard }, { store, lease: 1_000 });
  try {
    const result = await generateText({
      model: scriptedModel([
        { calls: [{ tool: 'charge_card', input: { amount: 1999, currency: 'usd' } }] },
      ]),
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
