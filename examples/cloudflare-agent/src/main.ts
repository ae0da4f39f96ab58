import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per user message, whatever the retries and double clicks did.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe tickets are not one per user message:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
