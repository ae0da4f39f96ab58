export * from '@idempotent-tools/core';
export {
  createRedisStore,
  type IoRedisLikeClient,
  type NodeRedisLikeClient,
  type RedisClient,
  RedisStore,
  type RedisStoreOptions,
} from './redis-store.js';
