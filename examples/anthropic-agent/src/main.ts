import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per request, whatever the network and the retries did.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe side effects are wrong: ${found.join('; ')}`);
  process.exit(1);
}
