/** Which driver a client the store is given takes (ioredis / iovalkey, or node-redis). */
import { InvalidInputError } from '@idempotent-tools/core';
import type {
  Driver,
  IoRedisLikeClient,
  NodeRedisLikeClient,
  UpstashLikeClient,
} from './driver.js';
import { ioredisDriver } from './driver-ioredis.js';
import { nodeRedisDriver } from './driver-node-redis.js';
import { isUpstashClient, upstashDriver } from './driver-upstash.js';

/** The driver for a client, or a typed error that says which clients the store takes. */
export function toDriver(client: unknown, field = 'redis'): Driver {
  const c = client as Record<string, unknown> | null | undefined;
  if (c != null && typeof c === 'object') {
    // ioredis and iovalkey: lowercase command methods (`evalsha`) and a `status`.
    if (typeof c.evalsha === 'function' && typeof c.duplicate === 'function') {
      return ioredisDriver(client as IoRedisLikeClient);
    }
    // node-redis: `sendCommand` and `isOpen` (v4 to v6; `evalSha`, never `evalsha`).
    if (typeof c.sendCommand === 'function' && 'isOpen' in c && typeof c.duplicate === 'function') {
      return nodeRedisDriver(client as NodeRedisLikeClient);
    }
    if (isUpstashClient(c)) return upstashDriver(client as UpstashLikeClient);
  }
  throw new InvalidInputError({
    field,
    message: `createRedisStore needs a Redis client: ioredis or iovalkey (createRedisStore(new Redis(url))), or node-redis (createRedisStore(await createClient({ url }).connect()), or a connected createCluster(...)), or Upstash's REST client (createRedisStore(new Redis({ url, token })) from @upstash/redis); got ${client === null ? 'null' : typeof client}.`,
  });
}
