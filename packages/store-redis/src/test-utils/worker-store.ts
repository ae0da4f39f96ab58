/**
 * Store module for the multi-process race and crash workers of `@idempotent-tools/testing`
 * (`runWorkers({ storeModule })`). Reads REDIS_URL, IDEM_REDIS_PREFIX and IDEM_REDIS_DRIVER (a
 * test driver's name: ioredis, iovalkey, redis@6, redis@5) from the environment.
 */
import { createRedisStore } from '../redis-store.js';
import { driverNamed, targetOf } from './drivers.js';

export async function createStore() {
  const driver = driverNamed(process.env.IDEM_REDIS_DRIVER ?? 'ioredis');
  const client = await driver.connect(targetOf(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'));
  const store = createRedisStore(client, { prefix: process.env.IDEM_REDIS_PREFIX ?? 'idem:' });
  return {
    store,
    close: async () => {
      await store.close();
      await driver.close(client);
    },
  };
}
