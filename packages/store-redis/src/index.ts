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
export {
  createRedisStore,
  type IoRedisLikeClient,
  type NodeRedisLikeClient,
  type RedisClient,
  RedisStore,
  type RedisStoreOptions,
  type UpstashLikeClient,
} from './redis-store.js';
