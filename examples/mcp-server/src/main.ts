import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per user turn: none twice, none missing, none given to another user's turn.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe tickets are not one per user turn:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
