export * from './approvals/approvals.js';
export * from './errors/index.js';
export { closestName } from './errors/option-names.js';
export { currentExecutionContext, withExecutionContext } from './executor/context.js';
export type { EncryptionOptions } from './executor/encryption.js';
export * from './executor/executor-options.js';
export * from './executor.js';
export * from './keys/canonicalize.js';
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
} from './keys/derive-key.js';
export * from './model-output.js';
export * from './observe/audit.js';
export * from './observe/batched-sink.js';
export * from './observe/events.js';
export * from './observe/logger-sink.js';
export * from './observe/replay-rate-monitor.js';
export * from './observe/sinks.js';
export * from './store/inspection.js';
export * from './store/local-cache.js';
export * from './store/memory-store.js';
export type * from './store/store.js';
export * from './store/store-deadline.js';
export * from './store/store-text.js';
export type {
  VendorCallArgs,
  VendorCallFunction,
  VendorCallPolicy,
} from './vendor-calls/ledger.js';
export {
  type IdempotentFetchOptions,
  idempotencyHeaders,
  idempotentFetch,
  vendorKey,
} from './vendor-calls/vendor.js';
