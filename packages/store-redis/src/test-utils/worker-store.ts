/**
 * Store module for the multi-process race and crash workers of `@idempotent-tools/testing`
 * (`runWorkers({ storeModule })`). Reads REDIS_URL and IDEM_REDIS_PREFIX from the environment.
 */
import { Redis } from 'ioredis';
import { createRedisStore } from '../redis-store.js';

export async function createStore() {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: 1,
  });
  const store = createRedisStore(redis, { prefix: process.env.IDEM_REDIS_PREFIX ?? 'idem:' });
  return {
    store,
    close: async () => {
      await store.close();
      await redis.quit();
    },
  };
}
