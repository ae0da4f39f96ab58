import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket and one email per customer, whatever the retries did: none twice, none missing
// (Bob got his own ticket, not Ada's replayed), none for someone else.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe side effects are not one per customer:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
