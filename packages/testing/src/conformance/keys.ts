import { type IdempotencyStore, InvalidInputError } from '@idempotent-tools/core';
import { fingerprint, LONG_TTL } from './shared.js';
import type { ConformanceContext } from './types.js';

/** Keys with awkward characters are independent records; malformed text is refused or kept. */
export function defineKeyTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define } = ctx;
  const { key, claimInput, expectStatus, acquire, mustGet, complete } = ctx.fixture;
  describe('keys', () => {
    define(
      'malformed text (a lone surrogate) in meta or outcome: refused with InvalidInputError, or kept byte-exact',
      async ({ store }) => {
        const refusedOrKept = async <T>(
          op: () => Promise<T>,
          check: (value: T) => Promise<void>,
        ) => {
          let value: T;
          try {
            value = await op();
          } catch (error) {
            expect(InvalidInputError.isInstance(error)).toBe(true);
            return;
          }
          await check(value);
        };
        const metaInput = claimInput(key(), { meta: { toolName: 't', turnId: 'a\ud800b' } });
        await refusedOrKept(
          () => store.claim(metaInput),
          async () => expect((await mustGet(store, metaInput.key)).meta?.turnId).toBe('a\ud800b'),
        );
        const input = claimInput(key());
        await acquire(store, input);
        await refusedOrKept(
          () =>
            store.complete({
              key: input.key,
              token: input.token,
              state: 'completed',
              outcome: '"\udc00"',
              ttlMs: LONG_TTL,
            }),
          async () => expect((await mustGet(store, input.key)).outcome).toBe('"\udc00"'),
        );
      },
    );
    define('keys with awkward characters are independent records', async ({ store }) => {
      const base = key();
      const long = `${base}-`.padEnd(127, 'x');
      const keys = [
        base,
        `${base}:`,
        `${base}:a`,
        `${base}:a:b`,
        `${base}{a}`,
        `{${base}}`,
        `${base} a`,
        `${base} `,
        `${base}é`,
        `${base}e\u0301`,
        `${base}K`,
        `${base}k`,
        `${base}🔑 ключ 鍵`,
        `${base}*`,
        `${base}?`,
        `${base}%`,
        `${base}_`,
        `${base}/\\'"`,
        `${long}x`,
        `${long}y`,
      ];
      expect(new Set(keys).size).toBe(keys.length);
      expect(`${long}x`.length).toBe(128);

      const inputs = keys.map((k, i) => claimInput(k, { fingerprint: fingerprint(`key-${i}`) }));
      for (const input of inputs) await acquire(store, input);
      for (const [i, input] of inputs.entries()) {
        const record = await mustGet(store, input.key);
        expect({ key: record.key, fingerprint: record.fingerprint, token: record.token }).toEqual({
          key: keys[i],
          fingerprint: input.fingerprint,
          token: input.token,
        });
      }
      for (const [i, input] of inputs.entries()) {
        await complete(store, input.key, input.token, 'completed', `"outcome ${i}"`);
      }
      const released = claimInput(`${base}-released`);
      await acquire(store, released);
      expect(await store.release(released.key, released.token)).toBe(true);
      for (const [i, input] of inputs.entries()) {
        const result = expectStatus(
          await store.claim(claimInput(input.key, { fingerprint: input.fingerprint })),
          'completed',
        );
        expect(result.record.outcome).toBe(`"outcome ${i}"`);
      }
    });
  });
}
