export * from './approvals.js';
export * from './audit.js';
export * from './batched-sink.js';
export * from './canonicalize.js';
export {
  DEFAULT_MAX_ARGS_BYTES,
  type DerivedKey,
  type DeriveKeyOptions,
  deriveKey,
  KEY_LIMITS,
  KEY_VERSION,
  type KeyInput,
  MIN_HMAC_KEY_BYTES,
  validateKeyParts,
} from './derive-key.js';
export type { EncryptionOptions } from './encryption.js';
export * from './errors/index.js';
export * from './events.js';
export * from './executor.js';
export * from './executor-options.js';
export * from './inspection.js';
export type { VendorCallArgs, VendorCallFunction, VendorCallPolicy } from './ledger.js';
export * from './local-cache.js';
export * from './logger-sink.js';
export * from './memory-store.js';
export * from './model-output.js';
export { closestName } from './option-names.js';
export * from './replay-rate-monitor.js';
export * from './sinks.js';
export type * from './store.js';
export * from './store-deadline.js';
export * from './store-text.js';
export {
  currentExecutionContext,
  type IdempotentFetchOptions,
  idempotencyHeaders,
  idempotentFetch,
  vendorKey,
  withExecutionContext,
} from './vendor.js';
