import {
  createIdempotency,
  type IdempotencyStore,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { errorOf } from './shared.js';
import type { ConformanceContext } from './types.js';

/** A record the store cannot read is a `RecordIntegrityError`, never `StoreUnavailableError`. */
export function defineIntegrityTests<S extends IdempotencyStore>(ctx: ConformanceContext<S>): void {
  const { describe, expect, define, options } = ctx;
  const { key, claimInput } = ctx.fixture;

  describe('integrity', () => {
    define(
      'a record the store cannot read (corruptRecord, when given) is a RecordIntegrityError (corrupt), never StoreUnavailableError: fail-open never runs the tool',
      async ({ store }) => {
        const corrupt = options.corruptRecord;
        if (corrupt === undefined) return;
        const k = key('corrupt');
        await corrupt(store, k);
        for (const op of [() => store.claim(claimInput(k)), () => store.get(k)]) {
          const error = await errorOf(op());
          expect(RecordIntegrityError.isInstance(error)).toBe(true);
          expect(StoreUnavailableError.isInstance(error)).toBe(false);
          expect((error as RecordIntegrityError).reason).toBe('corrupt');
        }
        const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
        const call = { toolName: 'conformance', turnId: key('turn'), args: { n: 1 } };
        await corrupt(store, idempotency.keyOf(call).key);
        let runs = 0;
        for (let i = 0; i < 3; i++) {
          const error = await errorOf(
            idempotency.run(call, async () => {
              runs++;
              return 'ran over a corrupt record';
            }),
          );
          expect(RecordIntegrityError.isInstance(error)).toBe(true);
        }
        expect(runs).toBe(0);
      },
    );
  });
}
