import { createMemoryStore } from '@idempotent-tools/langgraph';
import { expect, test } from 'vitest';
import { checkEffects, runDemo } from './checkout.js';

test('the checkout charges each order once: a whole-graph retry replays the charge', async () => {
  const lines: string[] = [];
  const charges = await runDemo({ store: createMemoryStore(), log: (l) => lines.push(l) });
  expect(charges.map((c) => [c.chargeId, c.orderId])).toEqual([
    ['ch_1', 'o-1'],
    ['ch_2', 'o-2'],
  ]);
  expect(checkEffects(charges)).toEqual([]);
  expect(lines).toContain(
    'o-1: retried -> {"status":"shipped","chargeId":"ch_1"} (the charge replayed, not repeated)',
  );
  expect(lines).toContain('o-2: approved -> {"status":"shipped","chargeId":"ch_2"}');
});

test('checkEffects reports a charge that ran twice or is missing', () => {
  const c = (chargeId: string, orderId: string) => ({ chargeId, orderId, amount: 40 });
  expect(checkEffects([c('ch_1', 'o-1'), c('ch_2', 'o-1')])).toEqual([
    'order o-1 was charged 2 times (expected once)',
    'order o-2 was charged 0 times (expected once)',
  ]);
});
