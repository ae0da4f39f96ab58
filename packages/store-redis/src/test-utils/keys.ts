/** Test-only helpers shared by the Redis store tests. */
import { uniqueKey } from '@idempotent-tools/testing';
import type { Cluster, Redis } from 'ioredis';
import { scanKeys } from '../redis-store.js';

/** The tests' admin client (ioredis), whatever client the store under test uses. */
type RedisClient = Redis | Cluster;

/** A prefix no other test run uses (no braces: they would change the hash tag). */
export const testPrefix = (label: string): string => `${uniqueKey(`idem-test-${label}`)}:`;

/** Keys under `prefix` (on every master of a Cluster). */
export async function countKeys(redis: RedisClient, prefix: string): Promise<number> {
  let count = 0;
  for await (const keys of scanKeys(redis, prefix)) count += keys.length;
  return count;
}

/** Delete every key under `prefix` (one key per command: Cluster-safe). */
export async function dropKeys(redis: RedisClient, prefix: string): Promise<void> {
  for await (const keys of scanKeys(redis, prefix)) {
    await Promise.all(keys.map((key) => redis.unlink(key)));
  }
}
