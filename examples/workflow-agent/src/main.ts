/**
 * `npm start`: a Workflow SDK run whose worker is killed after the charge and before the engine
 * recorded the step; a second worker resumes the run and the engine runs the step again. A plain
 * step charges twice; `idempotentStep` once. Exits 1 if `idempotentStep` charged other than once.
 */
import { checkCharges, removeBuild, runCheckout } from './charges.js';

const log = (line: string) => console.log(`  ${line}`);

try {
  console.log('A plain "use step" (what the Workflow SDK guarantees: at-least-once):');
  const plain = await runCheckout({ plain: true, log });
  console.log(
    `  -> the bank charged ${plain.charges.length} time(s): ${plain.charges.map((c) => c.chargeId).join(', ')}\n`,
  );

  console.log('idempotentStep (the re-run step finds the stored charge):');
  const once = await runCheckout({ plain: false, log });
  console.log(
    `  -> the bank charged ${once.charges.length} time(s): ${once.charges.map((c) => `${c.chargeId} (Idempotency-Key ${c.key})`).join(', ')}`,
  );

  const problems = checkCharges(once);
  for (const problem of problems) console.error(`FAILED: ${problem}`);
  process.exitCode = problems.length === 0 ? 0 : 1;
} finally {
  await removeBuild(); // the bundles built into .demo-data/
}
