import { runDemo } from './demo.js';

const result = await runDemo({ print: (line) => console.log(line) });
// Exactly one charge per turn and one customer, whatever the retries did.
if (result.charges !== 4 || result.customers !== 1) {
  console.error('\nUnexpected side effects: the demo found a double execution.');
  process.exit(1);
}
