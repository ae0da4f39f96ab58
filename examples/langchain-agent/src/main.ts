import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket and one email per customer, whatever the retries did; Bob got his own.
const twice = [...Object.values(result.ticketsBy), ...Object.values(result.emailsTo)].some(
  (n) => n > 1,
);
if (twice) {
  console.error('\nA side effect ran twice: the tools were not idempotent.');
  process.exit(1);
}
if (result.ticketsBy.cus_bob !== 1) {
  console.error("\nBob has no ticket of his own: he was given Ada's.");
  process.exit(1);
}
