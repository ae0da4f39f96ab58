/**
 * Settling a stuck record (an operator's decision, audited): an `in_progress` record whose
 * attempt died and whose effect someone has looked up by hand is marked completed with the
 * outcome found, or released so the call may run again. Only a stale record (its lease ran out)
 * can be settled: a live attempt is never overruled. Emits one `settled` event naming who and why.
 */

import { InvalidInputError } from '../errors/index.js';
import { randomUUID, utf8Length } from '../runtime/index.js';
import type { Engine } from './call-run.js';
import type { StoredOutcome } from './outcome.js';
import type { Settlement, SettlementResult } from './types.js';

/** The lease a settlement holds while it writes, in ms. */
const SETTLE_LEASE_MS = 60_000;

function text(field: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) {
    throw new InvalidInputError({
      field,
      message: `settle needs ${field} as a non-empty string of at most ${max} characters (who settles it and why, for the audit trail).`,
    });
  }
  return value;
}

export async function settle(
  engine: Engine,
  ttlMs: number,
  key: string,
  settlement: Settlement,
  operator: { by: string; reason: string },
): Promise<SettlementResult> {
  text('key', key, 1024);
  const by = text('by', operator?.by, 256);
  const reason = text('reason', operator?.reason, 2_000);
  const released =
    settlement !== null && typeof settlement === 'object' && 'released' in settlement;
  if (
    !released &&
    (settlement === null || typeof settlement !== 'object' || !('completed' in settlement))
  ) {
    throw new InvalidInputError({
      field: 'settlement',
      message:
        'settle takes { completed: value } (the outcome found, stored and replayed) or { released: true } (the call may run again).',
    });
  }
  let encoded = '';
  if (!released) {
    try {
      encoded = JSON.stringify({
        v: (settlement as { completed: unknown }).completed,
      } satisfies StoredOutcome);
    } catch (cause) {
      throw new InvalidInputError({
        field: 'completed',
        cause,
        message: 'The settled outcome is not JSON. Give plain JSON.',
      });
    }
    if (utf8Length(encoded) > engine.maxResultBytes) {
      throw new InvalidInputError({
        field: 'completed',
        message: `The settled outcome is ${utf8Length(encoded)} bytes of JSON; the limit is ${engine.maxResultBytes} (maxResultBytes).`,
      });
    }
  }
  const { store } = engine;
  const record = await store.get(key);
  if (record === undefined) {
    throw new InvalidInputError({
      field: 'key',
      message: `There is no live record at ${key}: nothing to settle.`,
    });
  }
  if (record.state !== 'in_progress') {
    throw new InvalidInputError({
      field: 'key',
      message: `${key} is already ${record.state}: settle decides stuck in-progress records only. Its stored outcome is replayed as it is.`,
    });
  }
  const token = randomUUID();
  const taken = await store.takeover({
    key,
    staleToken: record.token,
    token,
    leaseMs: SETTLE_LEASE_MS,
    ttlMs: ttlMs + SETTLE_LEASE_MS,
  });
  if (!taken) {
    throw new InvalidInputError({
      field: 'key',
      message: `${key} is still held by a running attempt (its lease runs out at ${new Date(record.leaseExpiresAt).toISOString()}), or it changed meanwhile: a live attempt is never overruled. Settle it once its lease has run out.`,
    });
  }
  const done = released
    ? await store.release(key, token)
    : await store.complete({
        key,
        token,
        state: 'completed',
        outcome: engine.codec.seal(key, 'completed', encoded),
        ttlMs,
      });
  if (!done) {
    throw new InvalidInputError({
      field: 'key',
      message: `${key} changed while it was being settled; look at it again.`,
    });
  }
  engine.waiters.wake(key);
  const action = released ? 'released' : 'completed';
  const at = Date.now();
  try {
    engine.onEvent?.({
      key,
      toolName: record.meta?.toolName ?? '',
      scope: record.meta?.scope,
      turnId: record.meta?.turnId,
      outcome: 'settled',
      store: store.name,
      startedAt: at,
      endedAt: at,
      durationMs: 0,
      argsFingerprint: record.fingerprint,
      argsBytes: 0,
      ...(released ? {} : { resultBytes: utf8Length(encoded) }),
      operator: { by, reason, action },
    });
  } catch {
    // An observer must never break a settlement.
  }
  return { key, action, previous: record };
}
