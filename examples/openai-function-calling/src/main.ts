import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per request, whatever the network and the retries did.
if (result.duplicates > 0) {
  console.error('\nA side effect ran twice: the tools were not idempotent.');
  process.exit(1);
}
