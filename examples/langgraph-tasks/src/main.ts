/**
 * `npm start`: the checkout, offline (no model: the graph is plain code). Records live in a
 * SQLite file under .demo-data/ (fresh each run). Exits 1 when a charge ran twice or is missing.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { checkEffects, runDemo } from './checkout.js';

const file = '.demo-data/idempotency.sqlite';
mkdirSync('.demo-data', { recursive: true });
for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
const store = openSqliteStore(file);
try {
  const charges = await runDemo({ store, log: (line) => console.log(line) });
  const problems = checkEffects(charges);
  for (const problem of problems) console.error(`FAIL: ${problem}`);
  console.log(problems.length === 0 ? 'OK: every order charged exactly once' : '');
  process.exitCode = problems.length === 0 ? 0 : 1;
} finally {
  store.close();
}
