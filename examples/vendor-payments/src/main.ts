import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// Each order charged once at PayCo and paid out once at the bank, wherever the agent died.
if (result.duplicates > 0 || result.missing > 0) {
  console.error('\nA vendor charged twice (or never): the vendor calls were not idempotent.');
  process.exit(1);
}
