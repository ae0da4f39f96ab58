import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket and one email, whatever the retries did.
if (result.tickets > 1 || result.emails > 1) {
  console.error('\nA side effect ran twice: the tools were not idempotent.');
  process.exit(1);
}
