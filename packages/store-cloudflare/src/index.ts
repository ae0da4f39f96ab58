/**
 * The entry point in workerd (the `workerd` export condition, which wrangler and the Cloudflare
 * Vite plugin resolve): the Durable Object class, which needs `cloudflare:workers`, and the
 * client. Elsewhere `./elsewhere.ts` is loaded instead.
 */
import * as workers from 'cloudflare:workers';
import { createStore, type DurableObjectStore, type DurableObjectStoreOptions } from './client.js';
import type { IdempotencyObject } from './object.js';

// The names of @idempotent-tools/core a user of this store needs with it (the executor, the
// types of the store's own signatures); everything else of core comes from core itself.
export {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  createIdempotency,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListFilter,
  type RecordPage,
  type StatsFilter,
  type StoreCapabilities,
  type StoreStats,
  type TakeoverInput,
} from '@idempotent-tools/core';
export { DurableObjectStore, type DurableObjectStoreOptions } from './client.js';
export { IdempotencyObject } from './object.js';

/**
 * The idempotency store over the Durable Object namespace bound to `IdempotencyObject`.
 *
 * ```ts
 * const store = createDurableObjectStore(env.IDEMPOTENCY);
 * const idempotency = createIdempotency({ store });
 * ```
 */
export function createDurableObjectStore(
  namespace: DurableObjectNamespace<IdempotencyObject>,
  options?: DurableObjectStoreOptions,
): DurableObjectStore {
  return createStore(namespace, options, waitUntil === undefined ? {} : { waitUntil });
}

// Read from the namespace, not imported by name: a workerd older than its `waitUntil` export
// (2025) would refuse to load a module that names it.
const waitUntil = (workers as { waitUntil?: (promise: Promise<unknown>) => void }).waitUntil;
