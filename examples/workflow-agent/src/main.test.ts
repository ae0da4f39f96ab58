import { afterAll, expect, test } from 'vitest';
import { checkCharges, removeBuild, runCheckout } from './charges.js';

afterAll(removeBuild);

test('a plain step charges twice when the engine re-runs it after the worker was killed', async () => {
  const run = await runCheckout({ plain: true });
  expect(run.killed).toBe('SIGKILL');
  expect(run.runId).toMatch(/^wrun_/);
  expect(run.charges).toHaveLength(2);
  expect(checkCharges(run)).toEqual(['the order was charged 2 times (expected once)']);
});

test('idempotentStep charges once: the re-run step replays the stored charge', async () => {
  const run = await runCheckout({ plain: false });
  expect(run.killed).toBe('SIGKILL');
  expect(run.charges).toHaveLength(1);
  const [only] = run.charges;
  expect(only?.key).toMatch(/^[\x21-\x7e]{1,128}$/); // a header-safe Idempotency-Key
  expect(run.result).toEqual({ status: 'charged', chargeId: 'ch_1', amount: 42 });
  expect(checkCharges(run)).toEqual([]);
});
