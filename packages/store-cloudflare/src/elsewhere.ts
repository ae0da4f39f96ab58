/**
 * The entry point outside workerd (Node, browsers, other runtimes; the `default` export
 * condition): the client works with any Durable Object namespace (miniflare's
 * `getDurableObjectNamespace` in a Node script), but the Durable Object class exists only in
 * workerd, so `IdempotencyObject` here says how to load the workerd build instead.
 */
import { ConfigurationError } from '@idempotent-tools/core';
import { createStore, type DurableObjectStore, type DurableObjectStoreOptions } from './client.js';
import type { IdempotencyObject as WorkerdObject } from './object.js';

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

/** The Durable Object class runs only in workerd; constructing it elsewhere says so. */
export class IdempotencyObject {
  constructor() {
    throw new ConfigurationError({
      option: 'conditions',
      message:
        "IdempotencyObject runs only inside workerd (Cloudflare Workers, wrangler dev, miniflare), and this copy of @idempotent-tools/store-cloudflare was loaded without the 'workerd' export condition. Bundle the Worker with wrangler (or @cloudflare/vite-plugin), or give your bundler the conditions ['workerd', 'worker', 'browser'] (esbuild: conditions; Vite: resolve.conditions).",
    });
  }
}

/** The idempotency store over the Durable Object namespace bound to `IdempotencyObject`. */
export function createDurableObjectStore(
  namespace: DurableObjectNamespace<WorkerdObject>,
  options?: DurableObjectStoreOptions,
): DurableObjectStore {
  return createStore(namespace, options);
}
