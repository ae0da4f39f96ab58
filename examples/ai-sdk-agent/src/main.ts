import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One charge and one receipt per user, whatever the retries did: none twice, none missing, none
// given to the wrong user.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe side effects are not one per user:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
