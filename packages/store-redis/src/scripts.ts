import { sha1 } from '@noble/hashes/legacy.js';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils.js';

/**
 * The Lua scripts of the Redis store: one per operation, each one atomic on the server.
 *
 * A record is ONE string under KEYS[1] (`<prefix>{<key>}`): a header line, then the outcome.
 *
 * ```text
 * <S>\t<lease>\t<expires>\t<created>\t<completed>\t<token>\t<fingerprint>\t<meta>\n<outcome>
 * ```
 *
 * `S` is the state (`P` in progress, `C` completed, `F` failed); times are milliseconds from the
 * server's `TIME` (`completed` empty while in progress); `token` and `fingerprint` are escaped by
 * the client (`%`, tab and newline as `%25`, `%09`, `%0A`), `meta` is JSON (never holds a raw tab
 * or newline) or empty. The key's own TTL (`PXAT`) is the record's `expires`, so Redis deletes
 * expired records itself, and a key that exists is live (unless its TTL was removed by hand: see
 * `purge`).
 *
 * One string instead of a hash: a replay is `GET` + the value as it is (one bulk string to
 * decode, no Lua table, no `TIME` for a finished record); a fresh claim is `GET` + `TIME` + one
 * `SET ... PXAT`, and replies with the server time only (the client builds the record from its
 * input). Renewing a lease rewrites the value, but an `in_progress` value has no outcome: it is
 * a short header.
 *
 * `complete` and `release` publish the change: `SPUBLISH KEYS[2]` (sharded pub/sub, the channel
 * has the record's hash tag so it lives on the record's shard), or `PUBLISH ARGV[n]` (classic
 * pub/sub), with the channel name as the payload.
 */

/** Server time in ms. */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Milliseconds as an integer string (never `1e+15`). */
const MS = `local function ms(n) return string.format('%.0f', n) end
`;

/** Publish a change; ARGV[mode], ARGV[mode + 1] are the mode ('s', 'c' or '') and the channel. */
const notify = (mode: number) => `if ARGV[${mode}] == 's' then
  redis.call('SPUBLISH', KEYS[2], ARGV[${mode + 1}])
elseif ARGV[${mode}] == 'c' then
  redis.call('PUBLISH', ARGV[${mode + 1}], ARGV[${mode + 1}])
end
`;

/** The record's value, or return 0 when there is none. */
const VALUE = `local v = redis.call('GET', KEYS[1])
if not v then return 0 end
`;

/**
 * Fence: the record in `v` is live, `in_progress` and owned by ARGV[1]. Returns 0 otherwise.
 * Leaves `lease`, `expires`, `created` (strings) and `rest` (fingerprint TAB meta) for the script.
 */
const FENCE = `local lease, expires, created, token, rest =
  string.match(v, '^P\\t(%d+)\\t(%d+)\\t(%d+)\\t\\t([^\\t\\n]*)\\t([^\\n]*)\\n')
if token ~= ARGV[1] or tonumber(expires) <= now then return 0 end
`;

/**
 * KEYS: record. ARGV: fingerprint, token (both escaped), leaseMs, ttlMs, meta JSON ('' = none).
 * Returns the value (a string) when the record is finished: the key exists, so it is live. An
 * `in_progress` record: { now, value }. Acquired: now (an integer); the new record is
 * `P now+lease now+max(ttl, lease) now` with the input's fields.
 *
 * The claim sent again by its own attempt (same token and fingerprint: the reply of the first was
 * lost, or the client re-sent it after a reconnect) finds its own `in_progress` record and gets
 * { now, value } too: the client answers `acquired`. If that record's lease ran out meanwhile,
 * the script renews it first (as `renew` would: nobody took over), so the owner gets a live lease.
 */
const CLAIM = `local v = redis.call('GET', KEYS[1])
if v and string.byte(v, 1) ~= 80 then return v end
${NOW}${MS}if v then
  local l, e, created, tail = string.match(v, '^P\\t(%d+)\\t(%d+)\\t(%d+)(\\t\\t[^\\n]*\\n)')
  if e == nil then return { now, v } end
  e = tonumber(e)
  if e > now then
    if tonumber(l) <= now then
      local token, fingerprint = string.match(tail, '^\\t\\t([^\\t\\n]*)\\t([^\\t\\n]*)\\t')
      if token == ARGV[2] and fingerprint == ARGV[1] then
        local lease = now + tonumber(ARGV[3])
        e = math.max(e, lease)
        v = 'P\\t' .. ms(lease) .. '\\t' .. ms(e) .. '\\t' .. created .. tail
        redis.call('SET', KEYS[1], v, 'PXAT', ms(e))
      end
    end
    return { now, v }
  end
end
local lease = tonumber(ARGV[3])
local expires = now + math.max(tonumber(ARGV[4]), lease)
redis.call('SET', KEYS[1], 'P\\t' .. ms(now + lease) .. '\\t' .. ms(expires) .. '\\t' .. ms(now) ..
  '\\t\\t' .. ARGV[2] .. '\\t' .. ARGV[1] .. '\\t' .. ARGV[5] .. '\\n', 'PXAT', ms(expires))
return now
`;

/**
 * KEYS: record, channel. ARGV: token, state letter (C/F), outcome, ttlMs, notify mode, channel.
 * A record already finished by this token with this state and outcome (the same complete sent
 * again: its reply was lost) answers 1 and changes nothing; any other finished record 0.
 */
const COMPLETE = `${NOW}${VALUE}if string.byte(v, 1) ~= 80 then
  local s, e, token, at = string.match(v, '^([CF])\\t%d+\\t(%d+)\\t%d+\\t%d+\\t([^\\t\\n]*)\\t[^\\n]*\\n()')
  if s == ARGV[2] and token == ARGV[1] and tonumber(e) > now and #v - at + 1 == #ARGV[3] and
    string.sub(v, at) == ARGV[3] then
    return 1
  end
  return 0
end
${FENCE}${MS}local e = now + tonumber(ARGV[4])
redis.call('SET', KEYS[1], ARGV[2] .. '\\t' .. lease .. '\\t' .. ms(e) .. '\\t' .. created .. '\\t' ..
  ms(now) .. '\\t' .. token .. '\\t' .. rest .. '\\n' .. ARGV[3], 'PXAT', ms(e))
${notify(5)}return 1
`;

/** KEYS: record, channel. ARGV: token, notify mode, channel. */
const RELEASE = `${NOW}${VALUE}${FENCE}redis.call('DEL', KEYS[1])
${notify(2)}return 1
`;

/** KEYS: record. ARGV: token, leaseMs. The retention grows to cover the lease if needed. */
const RENEW = `${NOW}${VALUE}${FENCE}${MS}local l = now + tonumber(ARGV[2])
local e = math.max(tonumber(expires), l)
redis.call('SET', KEYS[1], 'P\\t' .. ms(l) .. '\\t' .. ms(e) .. '\\t' .. created .. '\\t\\t' .. token ..
  '\\t' .. rest .. '\\n', 'PXAT', ms(e))
return 1
`;

/**
 * KEYS: record. ARGV: stale token, new token (both escaped), leaseMs, ttlMs. Only once the lease
 * ran out. A record already `in_progress` under the new token (the same takeover sent again: its
 * reply was lost) answers 1 and changes nothing.
 */
const TAKEOVER = `${NOW}${VALUE}local lease, expires, created, token, rest =
  string.match(v, '^P\\t(%d+)\\t(%d+)\\t(%d+)\\t\\t([^\\t\\n]*)\\t([^\\n]*)\\n')
if token == nil or tonumber(expires) <= now then return 0 end
if token ~= ARGV[1] or tonumber(lease) > now then
  if token == ARGV[2] and token ~= ARGV[1] then return 1 end
  return 0
end
${MS}local l = tonumber(ARGV[3])
local e = now + math.max(tonumber(ARGV[4]), l)
redis.call('SET', KEYS[1], 'P\\t' .. ms(now + l) .. '\\t' .. ms(e) .. '\\t' .. created .. '\\t\\t' ..
  ARGV[2] .. '\\t' .. rest .. '\\n', 'PXAT', ms(e))
return 1
`;

/** KEYS: record. Returns { now, value }, or { now } when there is no value. */
const GET = `${NOW}local v = redis.call('GET', KEYS[1])
if not v then return { now } end
return { now, v }
`;

/**
 * KEYS: record. Deletes the record when it has expired (only possible when its Redis TTL was
 * removed by hand) and restores a missing TTL. Returns 1 when it deleted.
 */
const PURGE = `${NOW}local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local e = tonumber(string.match(v, '^[PCF]\\t%d+\\t(%d+)\\t'))
if e == nil then return 0 end
if e <= now then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', e)) end
return 0
`;

export interface Script {
  readonly lua: string;
  readonly sha: string;
}

const script = (lua: string): Script => ({
  lua,
  // EVALSHA's name of the script (SHA-1 is Redis's choice, not a security one); portable, so the
  // store loads on every runtime (an HTTP driver runs on Workers and edge runtimes).
  sha: bytesToHex(sha1(utf8ToBytes(lua))),
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
