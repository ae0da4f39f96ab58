import { afterEach, expect, test } from 'vitest';
import { type LegacyBank, type PayCo, startLegacyBank, startPayCo } from './vendors.js';

const open: Array<PayCo | LegacyBank> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((v) => v.close()));
});

const charge = (payco: PayCo, body: object, key?: string) =>
  fetch(`${payco.url}/v1/charges`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });

test('PayCo honours Idempotency-Key as Stripe does', async () => {
  const payco = await startPayCo();
  open.push(payco);
  const params = { amount: 500, currency: 'eur', customer: 'c', description: 'd' };
  const first = await charge(payco, params, 'k1');
  const again = await charge(payco, params, 'k1');
  // same key + same params -> the same charge, marked as a replay
  expect(await again.json()).toEqual(await first.json());
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  // same key + other params -> 422
  expect((await charge(payco, { ...params, amount: 501 }, 'k1')).status).toBe(422);
  // without a key every request charges
  await charge(payco, params);
  await charge(payco, params);
  expect(payco.charges.map((c) => c.id)).toEqual(['ch_1', 'ch_2', 'ch_3']);
  // concurrent requests with one key -> one is processed, the other gets 409
  payco.delayMs = 50;
  const statuses = await Promise.all([charge(payco, params, 'k2'), charge(payco, params, 'k2')]);
  expect(statuses.map((r) => r.status).sort()).toEqual([200, 409]);
  expect(payco.charges).toHaveLength(4);
});

test('LegacyBank has no idempotency; transfers are found by reference', async () => {
  const bank = await startLegacyBank();
  open.push(bank);
  const transfer = () =>
    fetch(`${bank.url}/transfers`, {
      method: 'POST',
      headers: { 'idempotency-key': 'ignored' },
      body: JSON.stringify({ amount: 1, to: 's', reference: 'r1', memo: 'm' }),
    });
  await transfer();
  await transfer();
  expect(bank.transfers).toHaveLength(2);
  const found = await fetch(`${bank.url}/transfers?reference=r1`);
  expect(((await found.json()) as unknown[]).length).toBe(2);
  const none = await fetch(`${bank.url}/transfers?reference=r2`);
  expect(await none.json()).toEqual([]);
  bank.searchDown = true;
  expect((await fetch(`${bank.url}/transfers?reference=r1`)).status).toBe(503);
});
