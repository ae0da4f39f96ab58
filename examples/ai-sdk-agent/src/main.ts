import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One charge per user and one receipt each, whatever the retries did.
const twice = Object.values(result.charges).some((count) => count > 1);
if (twice || result.receipts > 2) {
  console.error('\nA side effect ran twice: the tools were not idempotent.');
  process.exit(1);
}
if (Object.keys(result.charges).length < 2) {
  console.error("\nA user's charge was replayed from another user's: conversations were mixed up.");
  process.exit(1);
}
