/**
 * A vendor: an HTTP server on 127.0.0.1 in its own process, started by the harness. It appends
 * every request it receives to its log file (one JSON line, written before it answers), so
 * nothing the workers or the store do can hide an effect.
 *
 * - `plain`: no idempotency. Every `POST /effect` is an effect. `GET /lookup?key=K` says whether
 *   K happened (what a tool's `reconcile` asks).
 * - `dedupe`: honours `Idempotency-Key` like Stripe: the first request with a key is the effect,
 *   every later one gets the stored reply; each request is logged, so the raw requests per key
 *   show how often the dedupe was what saved a key.
 *
 * Faults it injects (changed with `POST /control`): an effect that commits `commitMs` after the
 * request arrived (`lookup` does not see it before; the reply waits for it), a reply held back
 * past the tool's timeout after the effect committed (`slowMs` for every effect while set, or at
 * random with `slowRate`: the tool sees no reply), a lookup answered 503 (`lookupFailRate`: the
 * tool's reconcile cannot tell).
 *
 * Run as a child process with `CHAOS_VENDOR` (JSON: {@link VendorSettings}) and an IPC channel; it
 * sends `{ port }` once listening.
 */
import { openSync, writeSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRandom } from './random.ts';
import type { VendorLine, VendorName } from './types.ts';

export interface VendorSettings {
  name: VendorName;
  log: string;
  seed: number;
  slowRate: number;
  slowMs: number;
  lookupFailRate: number;
}

/** What `POST /control` changes. */
export interface VendorControl {
  slowRate?: number;
  lookupFailRate?: number;
  /** Every effect commits this long after receipt (0: at once). */
  commitMs?: number;
  /** Every effect's reply is held this long (0: none beyond `slowRate`). */
  holdMs?: number;
}

const settings = JSON.parse(process.env.CHAOS_VENDOR ?? '{}') as VendorSettings;
const random = createRandom(settings.seed);
const log = openSync(settings.log, 'a');
let seq = 0;
let { slowRate, lookupFailRate } = settings;
let commitMs = 0;
let holdMs = 0;
/** Logical key -> the first effect's id (plain: what `lookup` answers). */
const effects = new Map<string, string>();
/** Idempotency-Key -> the stored reply's id, once committed (dedupe). */
const replies = new Map<string, Promise<string>>();

function header(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return Array.isArray(value) ? (value[0] ?? '') : (value ?? '');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': `${text.length}` });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

async function effect(req: IncomingMessage, res: ServerResponse): Promise<void> {
  await readBody(req);
  const key = header(req, 'x-chaos-key');
  if (key === '') return send(res, 400, { error: 'x-chaos-key missing' });
  const received = Date.now();
  const idem = header(req, 'idempotency-key');
  if (settings.name === 'dedupe' && idem === '') {
    return send(res, 400, { error: 'Idempotency-Key missing' });
  }
  const known = settings.name === 'dedupe' ? replies.get(idem) : undefined;
  const isEffect = known === undefined;
  let id: string;
  let committed = received;
  if (known !== undefined) {
    id = await known;
  } else {
    id = `${settings.name}-${++seq}`;
    const delay = commitMs;
    const commit = (async () => {
      if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
      if (!effects.has(key)) effects.set(key, id);
      return id;
    })();
    if (settings.name === 'dedupe') replies.set(idem, commit);
    await commit;
    committed = Date.now();
  }
  const held = isEffect ? (holdMs > 0 ? holdMs : random.chance(slowRate) ? settings.slowMs : 0) : 0;
  const line: VendorLine = {
    vendor: settings.name,
    key,
    id,
    effect: isEffect,
    ...(idem === '' ? {} : { idem }),
    worker: header(req, 'x-chaos-worker'),
    pid: Number(header(req, 'x-chaos-pid')),
    attempt: header(req, 'x-chaos-attempt'),
    called: Number(header(req, 'x-chaos-called')),
    started: Number(header(req, 'x-chaos-started')),
    checked: Number(header(req, 'x-chaos-checked')),
    received,
    committed,
    ...(held > 0 ? { slow: true } : {}),
  };
  // Logged before the reply: the effect is on file whatever happens to the caller.
  writeSync(log, `${JSON.stringify(line)}\n`);
  if (held > 0) await new Promise((resolve) => setTimeout(resolve, held));
  send(res, 200, { id, key });
}

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://vendor');
  if (req.method === 'POST' && url.pathname === '/effect') {
    effect(req, res).catch((error: unknown) => send(res, 500, { error: String(error) }));
    return;
  }
  if (req.method === 'GET' && url.pathname === '/lookup') {
    if (random.chance(lookupFailRate)) return send(res, 503, { error: 'lookup unavailable' });
    const id = effects.get(url.searchParams.get('key') ?? '');
    return send(res, 200, id === undefined ? { found: false } : { found: true, id });
  }
  if (req.method === 'POST' && url.pathname === '/control') {
    readBody(req).then((text) => {
      const change = JSON.parse(text) as VendorControl;
      slowRate = change.slowRate ?? slowRate;
      lookupFailRate = change.lookupFailRate ?? lookupFailRate;
      commitMs = change.commitMs ?? commitMs;
      holdMs = change.holdMs ?? holdMs;
      send(res, 200, { slowRate, lookupFailRate, commitMs, holdMs });
    });
    return;
  }
  send(res, 404, { error: 'not found' });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address !== null ? address.port : 0 });
});
process.on('disconnect', () => process.exit(0));
