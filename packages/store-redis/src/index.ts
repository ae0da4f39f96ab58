export * from '@idempotent-tools/core';
export {
  createRedisStore,
  type RedisClient,
  RedisStore,
  type RedisStoreOptions,
} from './redis-store.js';
