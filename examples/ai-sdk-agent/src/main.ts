import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One charge and one receipt, whatever the retries did.
if (result.charges > 1 || result.receipts > 1) {
  console.error('\nA side effect ran twice: the tools were not idempotent.');
  process.exit(1);
}
