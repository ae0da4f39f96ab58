import { randomBytes, randomUUID } from 'node:crypto';
import {
  createIdempotency,
  type IdempotencyStore,
  RecordIntegrityError,
} from '@idempotent-tools/core';
import { errorOf } from './shared.js';
import type { ConformanceContext } from './types.js';

/**
 * The executor's encryption at rest on the store under test: outcomes stored sealed, replayed
 * across a key rotation; copied, tampered or planted outcomes refused without running the tool.
 */
export function defineExecutorEncryptionTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, define, expect } = ctx;

  /** Write a finished record under `key` through the store API, as an attacker with write access could. */
  const plant = async (
    store: S,
    key: string,
    fingerprint: string,
    outcome: string,
    state: 'completed' | 'failed' = 'completed',
  ) => {
    const token = randomUUID();
    const claim = await store.claim({ key, fingerprint, token, leaseMs: 60_000, ttlMs: 120_000 });
    expect(claim.status).toBe('acquired');
    expect(await store.complete({ key, token, state, outcome, ttlMs: 120_000 })).toBe(true);
  };

  describe('executor: encryption at rest', () => {
    const k1 = randomBytes(32);
    const k2 = randomBytes(32);

    define(
      'outcomes are stored sealed and replay byte-exact, also after a key rotation',
      async ({ store }) => {
        const value = {
          card: '4242 4242 4242 4242',
          text: "'; DROP TABLE x; -- \r\n*1\r\n$4\r\nPING\r\n \u0000 \ud800 é 👩🏽‍💻",
        };
        const call = { toolName: 'charge', turnId: `turn-${randomUUID()}`, args: { amount: 1 } };
        const before = createIdempotency({ store, encryption: { keys: { k1 }, current: 'k1' } });
        const first = await before.run(call, async () => value);
        const record = await store.get(first.key);
        expect(record?.outcome?.startsWith('enc:v1:k1:')).toBe(true);
        expect(record?.outcome?.includes('4242')).toBe(false);

        const rotated = createIdempotency({
          store,
          encryption: { keys: { k2, k1 }, current: 'k2' },
        });
        let runs = 0;
        const replay = await rotated.run(call, async () => ++runs);
        expect(replay.replayed).toBe(true);
        expect(JSON.stringify(replay.value)).toBe(JSON.stringify(value));
        const fresh = await rotated.run({ ...call, turnId: `${call.turnId}-2` }, async () => value);
        expect((await store.get(fresh.key))?.outcome?.startsWith('enc:v1:k2:')).toBe(true);

        const retired = createIdempotency({ store, encryption: { keys: { k2 }, current: 'k2' } });
        const error = await errorOf(retired.run(call, async () => ++runs));
        expect(RecordIntegrityError.isInstance(error)).toBe(true);
        expect((error as RecordIntegrityError).reason).toBe('unknown_key');
        expect(runs).toBe(0);
      },
    );

    define(
      'an outcome copied under another key, tampered or planted in plain text is refused, and nothing runs',
      async ({ store }) => {
        const idempotency = createIdempotency({
          store,
          encryption: { keys: { k1 }, current: 'k1' },
        });
        const turn = `turn-${randomUUID()}`;
        const call = (suffix: string) => ({
          toolName: 'transfer',
          turnId: `${turn}-${suffix}`,
          args: { to: 'alice' },
        });
        const source = await idempotency.run(call('source'), async () => ({ ok: true }));
        const sealed = (await store.get(source.key))?.outcome ?? '';
        const parts = sealed.split(':');
        const ct = parts[5] ?? '';
        parts[5] = `${ct[0] === 'A' ? 'B' : 'A'}${ct.slice(1)}`;
        const cases: Array<[string, string, 'completed' | 'failed', string]> = [
          ['copied', sealed, 'completed', 'tampered'],
          ['relabelled failed', sealed, 'failed', 'tampered'],
          ['bit flip', parts.join(':'), 'completed', 'tampered'],
          ['garbage', 'enc:v1:k1:not-an-envelope', 'completed', 'corrupt'],
          ['plain text', '{"v":{"ok":"planted"}}', 'completed', 'unencrypted'],
        ];
        let runs = 0;
        for (const [label, outcome, state, reason] of cases) {
          const target = call(label);
          const { key, fingerprint } = idempotency.keyOf(target);
          await plant(store, key, fingerprint, outcome, state);
          const error = await errorOf(idempotency.run(target, async () => ++runs));
          expect(RecordIntegrityError.isInstance(error)).toBe(true);
          expect((error as RecordIntegrityError).reason).toBe(reason);
        }
        expect(runs).toBe(0);
        // The source record is untouched.
        const replay = await idempotency.run(call('source'), async () => ++runs);
        expect(JSON.stringify(replay.value)).toBe('{"ok":true}');
      },
    );
  });
}
