/**
 * A payment vendor on 127.0.0.1 in the test process: `POST /charges` with an `Idempotency-Key`
 * header charges (an effect), `GET /charges?key=` looks a charge up (what `reconcile` asks).
 * `dedupes`: a request whose key was charged before answers the first charge (Stripe's way).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Charge {
  id: string;
  key: string;
  amount: number;
}

export async function startVendor(options: { dedupes?: boolean } = {}) {
  const charges: Charge[] = [];
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://vendor');
    let body = '';
    req.on('data', (c) => (body += String(c)));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.method === 'GET') {
        const found = charges.find((c) => c.key === url.searchParams.get('key'));
        res.end(JSON.stringify(found ?? null));
        return;
      }
      const key = String(req.headers['idempotency-key'] ?? '');
      requests.push(key);
      const earlier = options.dedupes ? charges.find((c) => c.key === key) : undefined;
      if (earlier !== undefined) {
        res.end(JSON.stringify(earlier));
        return;
      }
      const { amount } = JSON.parse(body || '{}') as { amount?: number };
      const charge = { id: `ch_${charges.length + 1}`, key, amount: amount ?? 0 };
      charges.push(charge);
      res.end(JSON.stringify(charge));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    /** The effects: charges made. */
    charges,
    /** The `Idempotency-Key` of every charge request, in order. */
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
