import { main } from './agent.js';
import { approvalStory } from './approval-story.js';
import { httpStory } from './http-story.js';

const print = (line: string) => console.log(line);
const part = (title: string) =>
  print(`\n== ${title} ${'='.repeat(Math.max(0, 94 - title.length))}`);

part('1. Checkout: the agent killed at each step of a charge and a payout');
const matrix = await main({ print });
part("2. PayCo's side: idempotentHandler (replay, 409 in flight, 422 for another body)");
const http = await httpStory({ print });
part("3. Refunds with a person's approval");
const refunds = await approvalStory({ print });

const problems: string[] = [];
// Each order charged once at PayCo and paid out once at the bank, wherever the agent died.
if (matrix.duplicates > 0 || matrix.missing > 0) problems.push('a vendor charged twice (or never)');
if (http.charges !== 1) problems.push(`PayCo charged ${http.charges} times for one tool call`);
if (refunds.duplicates > 0 || refunds.missing > 0) problems.push('a refund ran twice (or never)');

print(
  `\nIn all: ${matrix.orders} checkouts (one charge and one transfer each), 1 charge served over idempotentHandler, ${refunds.refunds} refunds (${refunds.scenarios.length} orders): ${problems.length === 0 ? 'no effect twice, none missing.' : problems.join('; ')}`,
);
if (problems.length > 0) process.exit(1);
