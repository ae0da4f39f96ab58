/**
 * Two local mock vendors (node:http on 127.0.0.1), counting what they really did.
 *
 * - PayCo honours `Idempotency-Key` as Stripe does: the same key with the same params returns the
 *   same charge (`Idempotent-Replayed: true`), the same key with other params is a 422, the same
 *   key while its first request is still being processed is a 409. Without a key every POST
 *   charges.
 * - LegacyBank has no idempotency at all: every POST /transfers moves money. Transfers can be
 *   searched by the reference the caller gave (`GET /transfers?reference=...`).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Charge {
  id: string;
  amount: number;
  currency: string;
  customer: string;
  description: string;
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

export interface PayCo {
  url: string;
  /** Every charge PayCo made, in order: the count that must not exceed one per order. */
  charges: Charge[];
  /** Processing time of a new charge, in ms (to show 409s on concurrent requests). */
  delayMs: number;
  close(): Promise<void>;
}

/** A Stripe-like payment vendor. */
export async function startPayCo(hooks: VendorHooks = {}): Promise<PayCo> {
  const charges: Charge[] = [];
  const keys = new Map<string, { params: string; response?: Charge }>();
  const vendor: PayCo = {
    url: '',
    charges,
    delayMs: 0,
    close: () => new Promise((resolve) => running.server.close(() => resolve())),
  };
  const running = await listen(async (req, body, res) => {
    if (req.method === 'GET' && req.url === '/v1/charges') return send(res, 200, { data: charges });
    if (req.method !== 'POST' || req.url !== '/v1/charges') return send(res, 404, {});
    const params = JSON.parse(body) as Omit<Charge, 'id'>;
    const key = req.headers['idempotency-key'] as string | undefined;
    const digest = createHash('sha256').update(body).digest('hex');
    const seen = key === undefined ? undefined : keys.get(key);
    if (key !== undefined && seen !== undefined) {
      if (seen.params !== digest) {
        hooks.log?.(`PayCo  POST /v1/charges key ${short(key)}: other params -> 422`);
        return send(res, 422, {
          error: {
            type: 'idempotency_error',
            message: 'Keys for idempotent requests can only be used with the same parameters.',
          },
        });
      }
      if (seen.response === undefined) {
        hooks.log?.(`PayCo  POST /v1/charges key ${short(key)}: still processing -> 409`);
        return send(res, 409, {
          error: { type: 'idempotency_error', message: 'A request with this key is in progress.' },
        });
      }
      hooks.log?.(
        `PayCo  POST /v1/charges key ${short(key)}: same key, same params -> replays ${seen.response.id}`,
      );
      return send(res, 200, seen.response, { 'idempotent-replayed': 'true' });
    }
    const entry: { params: string; response?: Charge } = { params: digest };
    if (key !== undefined) keys.set(key, entry);
    if (vendor.delayMs > 0) await new Promise((r) => setTimeout(r, vendor.delayMs));
    const charge: Charge = { id: `ch_${charges.length + 1}`, ...params };
    charges.push(charge);
    entry.response = charge;
    const dropped = hooks.received?.('payco', charge.id) === 'drop';
    hooks.log?.(
      `PayCo  POST /v1/charges key ${key === undefined ? '(none)' : short(key)}: new charge ${charge.id} ${charge.amount} ${charge.currency}${dropped ? ' (reply lost)' : ''}`,
    );
    if (dropped) return drop(res);
    send(res, 200, charge);
  });
  vendor.url = running.url;
  return vendor;
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
