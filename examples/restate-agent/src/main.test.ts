import { expect, test } from 'vitest';
import { checkRefunds, runRefund } from './refunds.js';

test('a plain ctx.run pays the refund twice when Restate retries it after the crash', async () => {
  const run = await runRefund({ plain: true });
  expect(run.killed).toBe('SIGKILL');
  expect(run.refunds).toHaveLength(2);
  expect(checkRefunds(run)).toEqual(['the refund was paid 2 times (expected once)']);
});

test('idempotentRun pays it once: the retried run replays the stored refund', async () => {
  const run = await runRefund({ plain: false });
  expect(run.killed).toBe('SIGKILL');
  expect(run.refunds).toHaveLength(1);
  expect(run.answer).toEqual({ status: 'refunded', refundId: 'rf_1', amount: 40 });
  expect(checkRefunds(run)).toEqual([]);
});
