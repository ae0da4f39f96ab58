/**
 * Outbound `Idempotency-Key` (design section 8 (docs/design.md)): the key of the running tool call, sent on to the
 * vendors the tool calls, so that a re-execution (or an SDK retry) is deduped at the vendor too.
 */

import { InvalidInputError } from '../errors/index.js';
import {
  assertOwned,
  contextOrThrow,
  currentExecutionContext,
  noteEffect,
} from '../executor/context.js';
import type { ExecutionContext } from '../executor/types.js';
import { serializeSfString } from '../http/header.js';
import { sha256 } from '../keys/canonicalize.js';
import { toBase64 } from '../runtime/index.js';

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The key to send to a vendor for one of the calls a tool makes: the tool call's key itself
 * without a label, else `${key}.${first 22 characters of base64url(SHA-256(label))}` (69 ASCII
 * characters, safe as a header). The same key and label give the same vendor key on every retry
 * and in every process.
 */
export function vendorKey(key: string, label?: string): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidInputError({
      field: 'key',
      message: 'vendorKey needs the tool call key (ctx.key), a non-empty string.',
    });
  }
  return label === undefined ? key : `${key}.${sha256(label).slice(0, 22)}`;
}

/**
 * Headers for any SDK call that takes per-request headers:
 * `client.charges.create(body, { headers: idempotencyHeaders(ctx, 'charge') })`.
 *
 * @param context the tool's execution context; @default the tool call running now
 * @param label names this vendor call when the tool makes several (see `vendorKey`)
 */
export function idempotencyHeaders(
  context?: ExecutionContext,
  label?: string,
): { 'Idempotency-Key': string } {
  const ctx = contextOrThrow(context, 'idempotencyHeaders');
  // The headers go on a request about to be sent: not by an attempt that lost its call.
  assertOwned(ctx);
  noteEffect(ctx, 'keyed');
  return { 'Idempotency-Key': vendorKey(ctx.key, label) };
}

export interface IdempotentFetchOptions {
  /** The fetch to wrap. @default globalThis.fetch */
  fetch?: typeof fetch;
  /** The header to set. @default 'Idempotency-Key' */
  header?: string;
  /**
   * How the key is written in the header: `'raw'` (`Idempotency-Key: v1_...`, what Stripe and
   * most vendors take) or `'sf-string'` (`Idempotency-Key: "v1_..."`, an RFC 8941 String, as the
   * IETF HTTPAPI draft draft-ietf-httpapi-idempotency-key-header specifies; `idempotentHandler`
   * of `@idempotent-tools/core/http` takes both). The key is the same either way.
   * @default 'raw'
   */
  headerFormat?: 'raw' | 'sf-string';
  /** Whose key to send. @default the tool call running when the request is made */
  context?: ExecutionContext;
}

type BodyInit = NonNullable<RequestInit['body']>;

function bodyText(body: BodyInit | null | undefined): string | undefined {
  if (body == null) return '';
  if (typeof body === 'string' || body instanceof URLSearchParams) return body.toString();
  if (body instanceof ArrayBuffer) return toBase64(new Uint8Array(body));
  if (ArrayBuffer.isView(body)) {
    return toBase64(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
  }
  return undefined; // streams, FormData, Blob: not read
}

/**
 * A `fetch` that sets `Idempotency-Key` on mutating requests (POST, PUT, PATCH, DELETE) made
 * while a tool runs; other requests, requests outside a tool call and requests that already
 * carry the header pass through unchanged. Give it to a vendor SDK once:
 * `new Stripe(key, { httpClient: Stripe.createFetchHttpClient(idempotentFetch()) })`,
 * `new OpenAI({ fetch: idempotentFetch() })`.
 *
 * Per vendor call: during one tool execution, the n-th distinct mutating request to a method +
 * URL (n = 0, 1, ...) gets `vendorKey(ctx.key, `${METHOD} ${url} #${n}`)`. A request with the same
 * body as an earlier one to that method + URL (an SDK retry) reuses its key; bodies that cannot be
 * read without consuming them (streams, FormData, Blob) always count as new.
 */
export function idempotentFetch(options: IdempotentFetchOptions = {}): typeof fetch {
  const inner = options.fetch ?? globalThis.fetch;
  if (typeof inner !== 'function') {
    throw new InvalidInputError({
      field: 'fetch',
      message: 'idempotentFetch needs a fetch function: pass { fetch } or run on Node >= 18.',
    });
  }
  const header = options.header ?? 'Idempotency-Key';
  const headerFormat = options.headerFormat ?? 'raw';
  if (headerFormat !== 'raw' && headerFormat !== 'sf-string') {
    throw new InvalidInputError({
      field: 'headerFormat',
      message: `idempotentFetch: headerFormat must be 'raw' or 'sf-string', got ${String(headerFormat)}.`,
    });
  }
  const seen = new WeakMap<ExecutionContext, Map<string, (string | undefined)[]>>();
  return async (input, init) => {
    const context = options.context ?? currentExecutionContext();
    const request = input instanceof Request ? input : undefined;
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init?.headers ?? request?.headers);
    if (context === undefined || !MUTATING.has(method) || headers.has(header)) {
      return inner(input, init);
    }
    const url = request?.url ?? String(input);
    const body =
      init?.body !== undefined
        ? bodyText(init.body)
        : request?.body == null
          ? ''
          : await request.clone().text();
    const byEndpoint = seen.get(context) ?? new Map<string, (string | undefined)[]>();
    seen.set(context, byEndpoint);
    const endpoint = `${method} ${url}`;
    const bodies = byEndpoint.get(endpoint) ?? [];
    byEndpoint.set(endpoint, bodies);
    const digest = body === undefined ? undefined : sha256(body);
    let n = digest === undefined ? -1 : bodies.indexOf(digest);
    if (n < 0) n = bodies.push(digest) - 1;
    const key = vendorKey(context.key, `${endpoint} #${n}`);
    headers.set(header, headerFormat === 'sf-string' ? serializeSfString(key) : key);
    // Right before the request leaves: an attempt that no longer owns its call sends nothing.
    assertOwned(context);
    noteEffect(context, 'keyed');
    return inner(input, { ...init, headers });
  };
}
