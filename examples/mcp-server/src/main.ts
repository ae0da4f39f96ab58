import { main } from './agent.js';

const result = await main({ print: (line) => console.log(line) });
if (result.duplicates > 0) {
  console.error('\nA side effect ran twice: the tool was not idempotent.');
  process.exit(1);
}
