/**
 * Outbound `Idempotency-Key` (design section 8 (docs/design.md)): the key of the running tool call, sent on to the
 * vendors the tool calls, so that a re-execution (or an SDK retry) is deduped at the vendor too.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { sha256 } from './canonicalize.js';
import { InvalidInputError, PersistFailedError } from './errors/index.js';
import type { ExecutionContext } from './executor/types.js';
import { serializeSfString } from './http/header.js';

const storage = new AsyncLocalStorage<ExecutionContext>();

/** What an attempt sent, as far as the executor saw (for `onToolError: 'auto'`). */
export interface SentEffects {
  /** Mutating requests that carried the key (`idempotentFetch`, `idempotencyHeaders`). */
  keyed: number;
  /** Vendor calls recorded in the ledger (`vendorCall`). */
  ledger: number;
  /**
   * Requests that left the process while the tool ran (`fetch`, `node:http`, any SDK on them),
   * with a method that is not safe (not GET, HEAD, OPTIONS or TRACE): see `sent-requests.ts`.
   */
  requests: number;
}
const sentEffects = new WeakMap<ExecutionContext, SentEffects>();
const NOTHING_SENT: SentEffects = Object.freeze({ keyed: 0, ledger: 0, requests: 0 });

/** @internal Note that `context`'s attempt sent a request of `kind`. */
export function noteEffect(context: ExecutionContext, kind: keyof SentEffects): void {
  const sent = sentEffects.get(context) ?? { keyed: 0, ledger: 0, requests: 0 };
  sent[kind]++;
  sentEffects.set(context, sent);
}

/** @internal What `context`'s attempt was seen to send. */
export function effectsOf(context: ExecutionContext): SentEffects {
  return sentEffects.get(context) ?? NOTHING_SENT;
}

/**
 * @internal Run `fn` outside any tool's context: the executor's own store operations (a
 * `vendorCall`'s claim inside a tool, say) are not requests of the tool, and a store over HTTP
 * (DynamoDB, a REST Redis) must not count as the tool's effect.
 */
export function outsideTools<T>(fn: () => T): T {
  return storage.getStore() === undefined ? fn() : storage.exit(fn);
}

/** @internal The context of the tool call running now (for the request observers). */
export const runningContext = (): ExecutionContext | undefined => storage.getStore();
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Run `fn` with `context` as the current execution context. The executor does this for every
 * tool it runs; call it yourself only for a context you built (e.g. an unwrapped tool's).
 */
export function withExecutionContext<T>(context: ExecutionContext, fn: () => T): T {
  return runInContext(context, storage.getStore(), fn);
}

/**
 * @internal Run `fn` in `context`, a call made while `around` was running (the tool call a
 * `vendorCall` is part of): `isRunningAround` sees both.
 */
export function runInContext<T>(
  context: ExecutionContext,
  around: ExecutionContext | undefined,
  fn: () => T,
): T {
  if (around !== undefined && around !== context) enclosing.set(context, around);
  return storage.run(context, fn);
}

/** The context a nested call's context runs inside (a vendor call's tool call, say). */
const enclosing = new WeakMap<ExecutionContext, ExecutionContext>();

/**
 * @internal Whether a call with `key` is running now around the caller: the current tool call,
 * or one it runs inside. A call of the same key inside it would wait for itself (a tool wrapped
 * twice), so the executor refuses it.
 */
export function isRunningAround(
  key: string,
  around: ExecutionContext | undefined = storage.getStore(),
): boolean {
  for (let ctx = around; ctx !== undefined; ctx = enclosing.get(ctx)) {
    if (ctx.key === key) return true;
  }
  return false;
}

/** The execution context of the tool (or vendor call) running now, or undefined outside one. */
export function currentExecutionContext(): ExecutionContext | undefined {
  return storage.getStore();
}

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

/** @internal The given context, else the current one, else a typed error naming `what`. */
export function contextOrThrow(
  context: ExecutionContext | undefined,
  what: string,
): ExecutionContext {
  const ctx = context ?? storage.getStore();
  if (ctx === undefined) {
    throw new InvalidInputError({
      field: 'context',
      message: `${what} needs the tool call's execution context: call it inside a tool run by idempotency.run (or a framework adapter), or pass the tool's ctx.`,
    });
  }
  return ctx;
}

/**
 * @internal Throw unless the context's attempt still owns its call (right before a side effect):
 * its signal's reason when it was aborted, else a `PersistFailedError` (`lease_lost`).
 */
export function assertOwned(context: ExecutionContext): void {
  context.signal.throwIfAborted();
  if (context.stillOwned?.() === false) {
    throw new PersistFailedError({ key: context.key, reason: 'lease_lost', lost: 'no-renewal' });
  }
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
  if (body instanceof ArrayBuffer) return Buffer.from(body).toString('base64');
  if (ArrayBuffer.isView(body)) {
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('base64');
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
    const context = options.context ?? storage.getStore();
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
