import { main } from './agent.js';

const { refunds } = await main({ print: (line) => console.log(line) });
// Ann: two turns, one refund each (the retry and the duplicate replayed); Bob: one.
const expected: Record<string, number> = { '1001': 2, '1002': 1 };
const wrong = Object.keys({ ...expected, ...refunds }).filter((o) => refunds[o] !== expected[o]);
if (wrong.length > 0) {
  console.error(`\nRefunds ran ${JSON.stringify(refunds)}, expected ${JSON.stringify(expected)}.`);
  process.exit(1);
}
console.log('\nEvery refund ran exactly once per turn.');
