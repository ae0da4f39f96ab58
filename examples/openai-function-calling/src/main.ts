import { main, problems } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
// One ticket per request, whatever the network and the retries did: none twice, none missing
// (Bob got his own, not Ann's replayed), none for someone else. Offline, two reminders for Dan:
// the model's retries replayed, its `repeat: 2` sent.
const found = problems(result);
if (found.length > 0) {
  console.error(`\nThe side effects are not one per request:\n  ${found.join('\n  ')}`);
  process.exit(1);
}
