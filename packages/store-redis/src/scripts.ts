import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/**
 * The Lua scripts of the Redis store: one per operation, each one atomic on the server.
 *
 * A record is a hash under KEYS[1] (`<prefix>{<key>}`): `state`, `fingerprint`, `token`,
 * `lease`, `expires`, `created`, `completed`, `outcome`, `meta` (JSON). Times are milliseconds
 * from the server's `TIME`, so every client agrees on them; the key's own TTL (`PEXPIREAT`) is
 * the record's `expires`, so Redis deletes expired records itself. A hash (not one encoded
 * string) lets `renew`/`takeover` update a few small fields without re-writing a large outcome,
 * needs no JSON parser in Lua, and stays readable with `HGETALL` in `redis-cli`.
 *
 * `complete` and `release` publish the change: `SPUBLISH KEYS[2]` (sharded pub/sub, the channel
 * has the record's hash tag so it lives on the record's shard), or `PUBLISH ARGV[n]` (classic
 * pub/sub), with the channel name as the payload.
 */

/** Server time in ms; an expired record (even one Redis has not evicted yet) counts as missing. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Publish a change; ARGV[mode], ARGV[mode + 1] are the mode ('s', 'c' or '') and the channel. */
const notify = (mode: number) => `if ARGV[${mode}] == 's' then
  redis.call('SPUBLISH', KEYS[2], ARGV[${mode + 1}])
elseif ARGV[${mode}] == 'c' then
  redis.call('PUBLISH', ARGV[${mode + 1}], ARGV[${mode + 1}])
end
`;

/** Fence: the record is live, `in_progress` and owned by ARGV[1]. Returns 0 otherwise. */
const FENCE = `local h = redis.call('HMGET', KEYS[1], 'state', 'token', 'expires', 'lease')
if h[1] ~= 'in_progress' or h[2] ~= ARGV[1] or tonumber(h[3]) <= now then return 0 end
`;

/**
 * KEYS: record. ARGV: fingerprint, token, leaseMs, ttlMs, meta JSON ('' = none).
 * Returns { status, flat record }.
 */
const CLAIM = `${NOW}local rec = redis.call('HGETALL', KEYS[1])
if #rec > 0 then
  local h = {}
  for i = 1, #rec, 2 do h[rec[i]] = rec[i + 1] end
  if tonumber(h.expires) > now then
    local status = 'in_progress'
    if h.fingerprint ~= ARGV[1] then status = 'drift'
    elseif h.state ~= 'in_progress' then status = 'completed'
    elseif tonumber(h.lease) <= now then status = 'stale' end
    return { status, rec }
  end
  redis.call('DEL', KEYS[1])
end
local lease = tonumber(ARGV[3])
local expires = now + math.max(tonumber(ARGV[4]), lease)
local fields = { 'state', 'in_progress', 'fingerprint', ARGV[1], 'token', ARGV[2],
  'lease', now + lease, 'expires', expires, 'created', now }
if ARGV[5] ~= '' then
  fields[#fields + 1] = 'meta'
  fields[#fields + 1] = ARGV[5]
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIREAT', KEYS[1], expires)
return { 'acquired', fields }
`;

/** KEYS: record, channel. ARGV: token, state, outcome, ttlMs, notify mode, channel. */
const COMPLETE = `${NOW}${FENCE}local expires = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'outcome', ARGV[3], 'completed', now,
  'expires', expires)
redis.call('PEXPIREAT', KEYS[1], expires)
${notify(5)}return 1
`;

/** KEYS: record, channel. ARGV: token, notify mode, channel. */
const RELEASE = `${NOW}${FENCE}redis.call('DEL', KEYS[1])
${notify(2)}return 1
`;

/** KEYS: record. ARGV: token, leaseMs. The retention grows to cover the lease if needed. */
const RENEW = `${NOW}${FENCE}local lease = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'lease', lease)
if tonumber(h[3]) < lease then
  redis.call('HSET', KEYS[1], 'expires', lease)
  redis.call('PEXPIREAT', KEYS[1], lease)
end
return 1
`;

/** KEYS: record. ARGV: stale token, new token, leaseMs, ttlMs. Only once the lease ran out. */
const TAKEOVER = `${NOW}${FENCE}if tonumber(h[4]) > now then return 0 end
local lease = tonumber(ARGV[3])
local expires = now + math.max(tonumber(ARGV[4]), lease)
redis.call('HSET', KEYS[1], 'token', ARGV[2], 'lease', now + lease, 'expires', expires)
redis.call('PEXPIREAT', KEYS[1], expires)
return 1
`;

/** KEYS: record. Returns the flat record, or an empty array when missing or expired. */
const GET = `${NOW}local rec = redis.call('HGETALL', KEYS[1])
if #rec == 0 then return rec end
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires'))
if expires == nil or expires <= now then return {} end
return rec
`;

/**
 * KEYS: record. Deletes the record when it has expired (only possible when its Redis TTL was
 * removed by hand) and restores a missing TTL. Returns 1 when it deleted.
 */
const PURGE = `${NOW}local e = tonumber(redis.call('HGET', KEYS[1], 'expires'))
if e == nil then return 0 end
if e <= now then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIREAT', KEYS[1], e) end
return 0
`;

export interface Script {
  readonly lua: string;
  readonly sha: string;
}

const script = (lua: string): Script => ({
  lua,
  sha: createHash('sha1').update(lua).digest('hex'),
});

export const SCRIPTS = {
  claim: script(CLAIM),
  complete: script(COMPLETE),
  release: script(RELEASE),
  renew: script(RENEW),
  takeover: script(TAKEOVER),
  get: script(GET),
  purge: script(PURGE),
} as const;

/**
 * Run a script with `EVALSHA`; on `NOSCRIPT` (first use on a server, or after a restart or
 * `SCRIPT FLUSH`) send it once with `EVAL`, which also caches it. The keys decide the Cluster
 * node, so every script runs on its record's shard.
 */
export async function runScript(
  redis: Redis | Cluster,
  { lua, sha }: Script,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  try {
    return await redis.evalsha(sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return await redis.eval(lua, keys.length, ...keys, ...args);
  }
}
