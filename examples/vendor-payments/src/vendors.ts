/**
 * Two local mock vendors (node:http on 127.0.0.1), counting what they really did.
 *
 * - PayCo is a Stripe-like API served with `idempotentHandler` (`@idempotent-tools/core/http`,
 *   the IETF `Idempotency-Key` draft) through a small fetch adapter: the same key with the same
 *   request replays the stored response (`Idempotent-Replayed: true`), the same key with another
 *   body is a 422, the same key while its first request is still running is a 409 with
 *   `Retry-After`. Keys are kept per API key (`scope`); without a key every POST charges, as at
 *   Stripe (`required: false`). `POST /v1/charges` charges, `POST /v1/refunds` refunds.
 * - LegacyBank has no idempotency at all: every POST /transfers moves money. Transfers can be
 *   searched by the reference the caller gave (`GET /transfers?reference=...`).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createMemoryStore } from '@idempotent-tools/core';
import { type IdempotencyPolicy, idempotentHandler } from '@idempotent-tools/core/http';
import { listenFetch } from './fetch-server.js';

export interface Charge {
  id: string;
  amount: number;
  currency: string;
  customer: string;
  description: string;
}

export interface Refund {
  id: string;
  /** The charge refunded. */
  charge: string;
  amount: number;
  /** The caller's note (the order, the reason). */
  metadata: string;
}

export interface Transfer {
  id: string;
  amount: number;
  to: string;
  /** The caller's reference: what a lost transfer can be found by. */
  reference: string;
  memo: string;
}

/** What a vendor tells the orchestrator as it works (the transcript and the kill points). */
export interface VendorHooks {
  /** The vendor did the work and is about to reply. Return `'drop'` to never send the reply. */
  received?: (vendor: 'payco' | 'bank', id: string) => 'drop' | undefined;
  /** One line per request, for the transcript. */
  log?: (line: string) => void;
}

interface Running {
  server: Server;
  url: string;
}

async function listen(
  handler: (req: IncomingMessage, body: string, res: ServerResponse) => Promise<void> | void,
): Promise<Running> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      Promise.resolve(handler(req, body, res)).catch((error: unknown) => {
        res.writeHead(500).end(JSON.stringify({ error: String(error) }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}` };
}

function send(res: ServerResponse, status: number, body: unknown, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Drop the reply: the work is done, the caller never hears of it. */
function drop(res: ServerResponse) {
  res.socket?.destroy();
}

const short = (key: string) => (key.length > 16 ? `${key.slice(0, 12)}…` : key);

/** The API key PayCo gives the agent (sent as `Authorization: Bearer ...`). */
export const PAYCO_API_KEY = 'sk_test_agent';

export interface PayCo {
  url: string;
  /** Every charge PayCo made, in order: the count that must not exceed one per order. */
  charges: Charge[];
  /** Every refund PayCo made, in order. */
  refunds: Refund[];
  /** What PayCo publishes of its idempotency (the header, the methods, how long keys are kept). */
  policy: IdempotencyPolicy;
  /**
   * Hold the next new charge or refund mid-way (to show a 409 while it runs): `arrived` resolves
   * when it is being processed, and it finishes once `release()` is called.
   */
  hold(): { arrived: Promise<void>; release: () => void };
  close(): Promise<void>;
}

/** What the wrapped handler gets besides the request: the adapter's side of the exchange. */
interface Exchange {
  /** Set by the handler: the work is done, the reply is lost (the crash matrix's kill point). */
  dropReply: boolean;
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

/** A Stripe-like payment vendor, its API served with `idempotentHandler`. */
export async function startPayCo(hooks: VendorHooks = {}): Promise<PayCo> {
  const charges: Charge[] = [];
  const refunds: Refund[] = [];
  let held: { arrived: () => void; released: Promise<void> } | undefined;
  const waitIfHeld = async () => {
    const h = held;
    held = undefined;
    h?.arrived();
    await h?.released;
  };

  /** PayCo's API, unaware of idempotency: every POST it gets does the work. */
  const api = async (request: Request, exchange: Exchange): Promise<Response> => {
    const { pathname } = new URL(request.url);
    const key = request.headers.get('idempotency-key');
    const keyText = key === null ? '(none)' : short(key);
    if (request.method === 'GET' && pathname === '/v1/charges') return json(200, { data: charges });
    if (request.method === 'POST' && pathname === '/v1/charges') {
      const params = (await request.json()) as Omit<Charge, 'id'>;
      await waitIfHeld();
      const charge: Charge = { id: `ch_${charges.length + 1}`, ...params };
      charges.push(charge);
      exchange.dropReply = hooks.received?.('payco', charge.id) === 'drop';
      hooks.log?.(
        `PayCo  POST /v1/charges key ${keyText}: new charge ${charge.id} ${charge.amount} ${charge.currency}${exchange.dropReply ? ' (reply lost)' : ''}`,
      );
      return json(200, charge);
    }
    if (request.method === 'POST' && pathname === '/v1/refunds') {
      const params = (await request.json()) as Omit<Refund, 'id'>;
      const charge = charges.find((c) => c.id === params.charge);
      const refunded = refunds
        .filter((r) => r.charge === params.charge)
        .reduce((sum, r) => sum + r.amount, 0);
      if (charge === undefined || params.amount > charge.amount - refunded) {
        hooks.log?.(`PayCo  POST /v1/refunds key ${keyText}: refused (no such charge or too much)`);
        return json(400, { error: { type: 'invalid_request_error', param: 'amount' } });
      }
      await waitIfHeld();
      const refund: Refund = { id: `re_${refunds.length + 1}`, ...params };
      refunds.push(refund);
      hooks.log?.(
        `PayCo  POST /v1/refunds key ${keyText}: new refund ${refund.id} ${refund.amount} of ${refund.charge}`,
      );
      return json(200, refund);
    }
    return json(404, { error: { type: 'invalid_request_error', message: 'Unknown route.' } });
  };

  const handle = idempotentHandler<Request, [Exchange]>(api, {
    store: createMemoryStore(), // PayCo's own database
    // Keys belong to the client that sent them: PayCo's API key.
    scope: (request) => request.headers.get('authorization') ?? undefined,
    required: false, // as at Stripe: a POST without a key runs every time
  });

  const running = await listenFetch(async (request) => {
    const exchange: Exchange = { dropReply: false };
    const response = await handle(request, exchange);
    if (exchange.dropReply) return 'drop'; // stored by idempotentHandler; the caller never hears
    // What the handler answered without running the API, for the transcript.
    const key = request.headers.get('idempotency-key');
    const what = `PayCo  ${request.method} ${new URL(request.url).pathname} key ${short(key ?? '')}`;
    if (response.headers.get(handle.policy.replayHeader) === 'true') {
      const { id } = (await response.clone().json()) as { id?: string };
      hooks.log?.(`${what}: same key, same request -> replays ${id} (Idempotent-Replayed: true)`);
    } else if (response.status === 409) {
      hooks.log?.(
        `${what}: the first request with this key is still running -> 409, Retry-After: ${response.headers.get('retry-after')}`,
      );
    } else if (response.status === 422) {
      hooks.log?.(`${what}: same key, another body -> 422 idempotency_key_reused`);
    }
    return response;
  });
  return {
    url: running.url,
    charges,
    refunds,
    policy: handle.policy,
    hold() {
      let arrived = () => {};
      let release = () => {};
      const arrival = new Promise<void>((resolve) => {
        arrived = resolve;
      });
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      held = { arrived, released };
      return { arrived: arrival, release };
    },
    close: () => new Promise((resolve) => running.server.close(() => resolve())),
  };
}

export interface LegacyBank {
  url: string;
  /** Every transfer the bank made, in order. */
  transfers: Transfer[];
  /** When true, the search endpoint answers 503 (reconcile cannot tell). */
  searchDown: boolean;
  close(): Promise<void>;
}

/** A bank API with no idempotency: every POST moves money. */
export async function startLegacyBank(hooks: VendorHooks = {}): Promise<LegacyBank> {
  const transfers: Transfer[] = [];
  const vendor: LegacyBank = {
    url: '',
    transfers,
    searchDown: false,
    close: () => new Promise((resolve) => running.server.close(() => resolve())),
  };
  const running = await listen((req, body, res) => {
    const url = new URL(req.url ?? '/', 'http://bank');
    if (req.method === 'GET' && url.pathname === '/transfers') {
      const reference = url.searchParams.get('reference') ?? '';
      if (vendor.searchDown) {
        hooks.log?.(`Bank   GET /transfers?reference=${short(reference)}: search down -> 503`);
        return send(res, 503, { error: 'search unavailable' });
      }
      const found = transfers.filter((t) => t.reference === reference);
      hooks.log?.(
        `Bank   GET /transfers?reference=${short(reference)}: ${found.length === 0 ? 'none' : found.map((t) => t.id).join(', ')}`,
      );
      return send(res, 200, found);
    }
    if (req.method !== 'POST' || url.pathname !== '/transfers') return send(res, 404, {});
    const params = JSON.parse(body) as Omit<Transfer, 'id'>;
    const transfer: Transfer = { id: `tr_${transfers.length + 1}`, ...params };
    transfers.push(transfer);
    const dropped = hooks.received?.('bank', transfer.id) === 'drop';
    hooks.log?.(
      `Bank   POST /transfers reference ${short(params.reference)}: new transfer ${transfer.id} ${transfer.amount} to ${transfer.to}${dropped ? ' (reply lost)' : ''}`,
    );
    if (dropped) return drop(res);
    send(res, 200, transfer);
  });
  vendor.url = running.url;
  return vendor;
}
