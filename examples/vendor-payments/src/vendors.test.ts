import { afterEach, expect, test } from 'vitest';
import {
  type LegacyBank,
  PAYCO_API_KEY,
  type PayCo,
  startLegacyBank,
  startPayCo,
} from './vendors.js';

const open: Array<PayCo | LegacyBank> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((v) => v.close()));
});

const charge = (payco: PayCo, body: object, key?: string) =>
  fetch(`${payco.url}/v1/charges`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${PAYCO_API_KEY}`,
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });

test('PayCo honours Idempotency-Key through idempotentHandler, as Stripe does', async () => {
  const payco = await startPayCo();
  open.push(payco);
  const params = { amount: 500, currency: 'eur', customer: 'c', description: 'd' };
  const first = await charge(payco, params, '"k1"'); // the draft's form (an RFC 8941 String)
  const again = await charge(payco, params, 'k1'); // Stripe's raw form: the same key
  // same key + same request -> the same charge, marked as a replay
  expect(await again.json()).toEqual(await first.json());
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  // same key + another body -> 422
  const other = await charge(payco, { ...params, amount: 501 }, 'k1');
  expect(other.status).toBe(422);
  expect(await other.json()).toMatchObject({ code: 'idempotency_key_reused' });
  // without a key every request charges
  await charge(payco, params);
  await charge(payco, params);
  expect(payco.charges.map((c) => c.id)).toEqual(['ch_1', 'ch_2', 'ch_3']);
  // the same key while the first request is running -> 409 with Retry-After, then the replay
  const held = payco.hold();
  const running = charge(payco, params, 'k2');
  await held.arrived;
  const inFlight = await charge(payco, params, 'k2');
  expect(inFlight.status).toBe(409);
  expect(inFlight.headers.get('retry-after')).toBe('1');
  held.release();
  expect((await running).status).toBe(200);
  expect((await charge(payco, params, 'k2')).headers.get('idempotent-replayed')).toBe('true');
  expect(payco.charges).toHaveLength(4);
  // keys belong to the API key that sent them: another client's k1 is its own charge
  const otherClient = await fetch(`${payco.url}/v1/charges`, {
    method: 'POST',
    headers: { 'idempotency-key': 'k1', authorization: 'Bearer sk_test_other' },
    body: JSON.stringify(params),
  });
  expect(otherClient.headers.get('idempotent-replayed')).toBeNull();
  expect(payco.charges).toHaveLength(5);
});

test('PayCo refunds: at most what was charged', async () => {
  const payco = await startPayCo();
  open.push(payco);
  await charge(payco, { amount: 500, currency: 'eur', customer: 'c', description: 'd' });
  const refund = (amount: number, key: string) =>
    fetch(`${payco.url}/v1/refunds`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PAYCO_API_KEY}`, 'idempotency-key': key },
      body: JSON.stringify({ charge: 'ch_1', amount, metadata: 'm' }),
    });
  expect((await refund(300, 'r1')).status).toBe(200);
  expect((await refund(300, 'r1')).headers.get('idempotent-replayed')).toBe('true');
  expect((await refund(300, 'r2')).status).toBe(400); // 300 + 300 > 500
  expect(payco.refunds.map((r) => [r.id, r.amount])).toEqual([['re_1', 300]]);
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
