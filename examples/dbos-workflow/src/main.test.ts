import { expect, test } from 'vitest';
import { checkEffects } from './bank.js';
import { runDemo } from './shop.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';

test('each workflow killed inside its charge and recovered by DBOS charges once', async () => {
  const lines: string[] = [];
  const { charges, orders } = await runDemo({ databaseUrl, log: (l) => lines.push(l) });
  expect(charges.map((c) => [c.chargeId, c.orderId])).toEqual([
    ['ch_1', 'o-1'],
    ['ch_2', 'o-2'],
  ]);
  expect(checkEffects(charges, orders)).toEqual([]);
  expect(lines).toContain(
    `o-1: a new worker's DBOS recovered the workflow -> {"result":{"chargeId":"ch_1","shipped":"shipped o-1"}}`,
  );
  expect(lines).toContain(
    `o-2: a new worker's DBOS recovered the workflow -> {"result":{"chargeId":"ch_2","shipped":"shipped o-2"}}`,
  );
});

test('checkEffects reports a charge that ran twice or is missing', () => {
  const c = (chargeId: string, orderId: string) => ({
    chargeId,
    orderId,
    amount: 40,
    idempotencyKey: chargeId,
  });
  expect(
    checkEffects(
      [c('ch_1', 'o-1'), c('ch_2', 'o-1')],
      [
        { id: 'o-1', amount: 40 },
        { id: 'o-2', amount: 25 },
      ],
    ),
  ).toEqual([
    'order o-1 was charged 2 times (expected once)',
    'order o-2 was charged 0 times (expected once)',
  ]);
});
