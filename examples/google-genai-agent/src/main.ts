import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per request, whatever the network and the retries did: none twice, none missing.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe tickets are not one per request:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
