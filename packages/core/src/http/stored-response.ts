/**
 * A handler's response as it is stored (status, the headers worth replaying, the body bytes) and
 * as it is replayed.
 */

import { fromBase64, toBase64, utf8Length } from '../runtime/index.js';

/** The stored outcome of one request: JSON, so every store keeps it. */
export interface StoredResponse {
  /** Format of this record. */
  v: 1;
  status: number;
  statusText: string;
  /** The headers replayed, in order; `set-cookie`, `date` and hop-by-hop headers left out. */
  headers: [string, string][];
  /** The body, base64; null for no body or an omitted one. */
  body: string | null;
  /** True when the body was over `maxResponseBytes`: status and headers are replayed without it. */
  bodyOmitted?: true;
  /** True when headers past `HEADER_BUDGET` bytes were left out (they are not replayed). */
  headersOmitted?: true;
}

/** Bytes of response headers kept for replays (name + value); the rest are left out. */
export const HEADER_BUDGET = 32 * 1024;

/**
 * Never replayed: `set-cookie` (a session or CSRF cookie minted for the first request; a replay
 * would hand it out again), `date` (the replay's own date is set by the server), the hop-by-hop
 * headers of RFC 9110 section 7.6.1 (and those the response's `Connection` names), and
 * `content-length` (recomputed from the replayed body).
 */
const NOT_REPLAYED = new Set([
  'set-cookie',
  'set-cookie2',
  'date',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
]);

/** Statuses whose responses have no body (a `Response` with one is refused). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/** Header value saying the replayed body was left out (over `maxResponseBytes`). */
export const BODY_OMITTED_HEADER = 'Idempotent-Replay-Body-Omitted';
/** Set on a replay whose stored response left some headers out (over `HEADER_BUDGET`). */
export const HEADERS_OMITTED_HEADER = 'Idempotent-Replay-Headers-Omitted';

function concat(chunks: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

function replayedHeaders(
  headers: Headers,
  replayHeader: string,
): { kept: [string, string][]; omitted: boolean } {
  const hopByHop = new Set(
    (headers.get('connection') ?? '')
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ''),
  );
  const marker = replayHeader.toLowerCase();
  const kept: [string, string][] = [];
  let bytes = 0;
  let omitted = false;
  for (const [name, value] of headers) {
    if (NOT_REPLAYED.has(name) || hopByHop.has(name) || name === marker) continue;
    // A header set too large to keep must not make the response unstorable (the effect ran):
    // what fits is kept, the rest left out, and the replay says so.
    const size = utf8Length(name) + utf8Length(value);
    if (bytes + size > HEADER_BUDGET) {
      omitted = true;
      continue;
    }
    bytes += size;
    kept.push([name, value]);
  }
  return { kept, omitted };
}

/**
 * Read the handler's response for storing: up to `maxBytes` of its body is kept; `live` is the
 * response for the first caller, with the whole body (what was read, then the rest of the
 * stream when the body was longer than `maxBytes`).
 */
export async function captureResponse(
  response: Response,
  maxBytes: number,
  replayHeader: string,
): Promise<{ stored: StoredResponse; live: Response }> {
  const init = { status: response.status, statusText: response.statusText };
  const replayed = replayedHeaders(response.headers, replayHeader);
  const stored: StoredResponse = { v: 1, ...init, headers: replayed.kept, body: null };
  if (replayed.omitted) stored.headersOmitted = true;
  const liveInit = { ...init, headers: response.headers };
  if (response.body === null || NULL_BODY.has(response.status)) {
    return { stored, live: new Response(null, liveInit) };
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    total += value.byteLength;
    if (total > maxBytes) {
      // Too big to keep: store status and headers; the first caller still gets every byte.
      const rest = new ReadableStream<Uint8Array>({
        start(controller) {
          for (const chunk of chunks) controller.enqueue(chunk);
        },
        async pull(controller) {
          const next = await reader.read();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
        cancel: (reason) => reader.cancel(reason),
      });
      return {
        stored: { ...stored, bodyOmitted: true },
        live: new Response(rest, liveInit),
      };
    }
  }
  const bytes = concat(chunks, total);
  stored.body = toBase64(bytes);
  return { stored, live: new Response(bytes, liveInit) };
}

/** True when `value` is a response this module stored. */
export function isStoredResponse(value: unknown): value is StoredResponse {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Partial<StoredResponse>;
  return (
    v.v === 1 &&
    typeof v.status === 'number' &&
    typeof v.statusText === 'string' &&
    Array.isArray(v.headers) &&
    (v.body === null || typeof v.body === 'string')
  );
}

/** The replay of a stored response: its status, headers and body, and the replay marker. */
export function replayResponse(stored: StoredResponse, replayHeader: string): Response {
  const headers = new Headers(stored.headers);
  headers.set(replayHeader, 'true');
  if (stored.headersOmitted === true) headers.set(HEADERS_OMITTED_HEADER, 'true');
  if (stored.bodyOmitted === true) {
    // The body is not kept: say so, and do not describe a body that is not there.
    for (const name of ['content-type', 'content-encoding', 'content-range']) headers.delete(name);
    headers.set(BODY_OMITTED_HEADER, 'true');
  }
  const body =
    stored.body === null || NULL_BODY.has(stored.status) ? null : fromBase64(stored.body);
  return new Response(body, { status: stored.status, statusText: stored.statusText, headers });
}
