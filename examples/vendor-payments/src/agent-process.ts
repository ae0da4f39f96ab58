/**
 * One agent process: it runs one `checkout` tool call (SQLite store) and prints, one JSON line
 * each, the idempotency events and its reply. Started by agent.ts; `killAt` makes it SIGKILL
 * itself at that step (the vendor-side steps are killed by the orchestrator).
 */
import {
  createIdempotency,
  errorForModel,
  markReplayed,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';
import { type CheckoutArgs, checkoutPolicy, checkoutTool, type Step } from './checkout.js';

export interface AgentProcessInput {
  database: string;
  paycoUrl: string;
  bankUrl: string;
  turnId: string;
  args: CheckoutArgs;
  killAt?: Step;
  /** Lease of the tool call and of the ledger rows, in ms. */
  lease: number;
  /** Run the negative control (naive-checkout.ts) instead: no key, no ledger. Tests only. */
  naive?: boolean;
}

export type AgentLine =
  | { type: 'found'; state: string }
  | { type: 'event'; toolName: string; outcome: string }
  | { type: 'reply'; output: unknown };

const input = JSON.parse(process.argv[2] ?? '{}') as AgentProcessInput;
const write = (line: AgentLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
const die = (at: Step) => {
  if (at === input.killAt) process.kill(process.pid, 'SIGKILL');
};

const store = openSqliteStore(input.database);
const idempotency = createIdempotency({
  store,
  lease: input.lease,
  onEvent: (e) => write({ type: 'event', toolName: e.toolName, outcome: e.outcome }),
});
const vendors = { paycoUrl: input.paycoUrl, bankUrl: input.bankUrl, step: die };
const checkout =
  input.naive === true
    ? (await import('./naive-checkout.js')).naiveCheckoutTool(vendors)
    : checkoutTool({ idempotency, ...vendors });

const call = { toolName: 'checkout', turnId: input.turnId, args: input.args };
// For the transcript only: what an earlier agent left of this call.
const found = await store.get(idempotency.keyOf(call).key);
if (found !== undefined) write({ type: 'found', state: found.state });

let output: unknown;
try {
  const { value, replayed } = await idempotency.run(call, checkout, checkoutPolicy);
  die('after-persist'); // the outcome is stored; the reply to the model never leaves
  output = markReplayed(value, replayed);
} catch (error) {
  // What the model reads: an idempotency error with what to do next, or the tool's own error.
  output = errorForModel(error) ?? { error: String(error) };
}
write({ type: 'reply', output });
await store.close?.();
