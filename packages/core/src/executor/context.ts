/**
 * The execution context of the tool call running now (design section 8 (docs/design.md)): the
 * async context every tool runs in, what its attempt was seen to send, and whether it still owns
 * its call. The executor sets it; the vendor helpers (`vendor-calls/`) and the request observers read it.
 */
import { InvalidInputError, PersistFailedError } from '../errors/index.js';
import { createAsyncContext, hasAsyncContext } from '../runtime/index.js';
import type { ExecutionContext } from './types.js';

const storage = createAsyncContext<ExecutionContext>();

/** What an attempt sent, as far as the executor saw (for `onToolError: 'auto'`). */
export interface SentEffects {
  /** Mutating requests that carried the key (`idempotentFetch`, `idempotencyHeaders`). */
  keyed: number;
  /** Vendor calls recorded in the ledger (`vendorCall`). */
  ledger: number;
  /**
   * Requests that left the process while the tool ran (`fetch`, `node:http`, any SDK on them),
   * with a method that is not safe (not GET, HEAD, OPTIONS or TRACE): see
   * `vendor-calls/sent-requests.ts`.
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

/** @internal The given context, else the current one, else a typed error naming `what`. */
export function contextOrThrow(
  context: ExecutionContext | undefined,
  what: string,
): ExecutionContext {
  const ctx = context ?? storage.getStore();
  if (ctx === undefined) {
    throw new InvalidInputError({
      field: 'context',
      message: hasAsyncContext
        ? `${what} needs the tool call's execution context: call it inside a tool run by idempotency.run (or a framework adapter), or pass the tool's ctx.`
        : `${what} needs the tool call's execution context, and this runtime has no AsyncLocalStorage to find it: pass the tool's ctx, or on Cloudflare Workers enable the nodejs_compat (or nodejs_als) compatibility flag.`,
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
