/**
 * A process that runs the approval checkout on LangGraph's SqliteSaver + the SQLite idempotency
 * store. `MODE=pause`: runs until the approval interrupt, prints its value (JSON) and exits.
 * `MODE=crash`: runs, resumes with an approval by `BY`, and SIGKILLs itself right after the
 * charge's outcome was stored (its result never reaches the checkpoint).
 * Env: CHECKPOINT_FILE, SQLITE_FILE, CHARGES_FILE, LABELS_FILE, THREAD_ID, MODE, BY.
 */
import { createIdempotency } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { Command } from '@langchain/langgraph';
import { approvalCheckout } from './approval-checkout.js';
import { openSqliteSaver } from './node-sqlite-saver.js';

const env = process.env;
const idempotency = createIdempotency({
  store: openSqliteStore(env.SQLITE_FILE as string),
  onEvent: (event) => {
    if (env.MODE === 'crash' && event.toolName === 'charge' && event.outcome === 'executed') {
      process.kill(process.pid, 'SIGKILL');
    }
  },
});
const workflow = approvalCheckout({
  checkpointer: openSqliteSaver(env.CHECKPOINT_FILE as string),
  idempotency,
  chargesFile: env.CHARGES_FILE as string,
  labelsFile: env.LABELS_FILE as string,
});
// `sync`: every checkpoint is written before the run goes on.
const config = {
  configurable: { thread_id: env.THREAD_ID as string },
  durability: 'sync' as const,
};
const paused = (await workflow.invoke({ id: 'o-1', amount: 40 }, config)) as {
  __interrupt__?: Array<{ value: { approvalKey: string } }>;
};
const request = paused.__interrupt__?.[0]?.value;
if (env.MODE === 'pause') {
  process.stdout.write(JSON.stringify(request));
  process.exit(0);
}
const resume = { type: 'approve', approvalKey: request?.approvalKey, by: env.BY };
await workflow.invoke(new Command({ resume }), config);
console.error('the child was meant to die before finishing');
process.exit(3);
