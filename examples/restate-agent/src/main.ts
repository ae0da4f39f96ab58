/**
 * `npm start`: a Restate invocation whose service process is killed after the refund was paid and
 * before Restate recorded the `ctx.run`; Restate retries it in the restarted process. A plain
 * `ctx.run` pays twice; `idempotentRun` once. Exits 1 if `idempotentRun` paid other than once.
 */
import { checkRefunds, runRefund } from './refunds.js';

const log = (line: string) => console.log(`  ${line}`);

console.log('A plain ctx.run (what Restate guarantees: at-least-once):');
const plain = await runRefund({ plain: true, log });
console.log(
  `  -> the bank paid ${plain.refunds.length} refund(s): ${plain.refunds.map((r) => r.refundId).join(', ')}\n`,
);

console.log('idempotentRun (the retried run finds the stored outcome):');
const once = await runRefund({ plain: false, log });
console.log(
  `  -> the bank paid ${once.refunds.length} refund(s): ${once.refunds.map((r) => `${r.refundId} (Idempotency-Key ${r.key})`).join(', ')}`,
);

const problems = checkRefunds(once);
for (const problem of problems) console.error(`FAILED: ${problem}`);
process.exitCode = problems.length === 0 ? 0 : 1;
