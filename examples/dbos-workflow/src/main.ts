/**
 * `npm start`: the shop, offline, on a local PostgreSQL (DBOS's system database: DATABASE_URL,
 * default postgres://root@127.0.0.1:5432/test). Exits 1 when a charge ran twice or is
 * missing.
 */
import { checkEffects } from './bank.js';
import { runDemo } from './shop.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const { charges, orders } = await runDemo({ databaseUrl, log: (line) => console.log(line) });
const problems = checkEffects(charges, orders);
for (const problem of problems) console.error(`FAIL: ${problem}`);
console.log(problems.length === 0 ? 'OK: every order charged exactly once' : '');
process.exitCode = problems.length === 0 ? 0 : 1;
