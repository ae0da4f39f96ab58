import { randomUUID } from 'node:crypto';
import {
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
  PersistFailedError,
  ReplayedFailureError,
} from '@idempotent-tools/core';
import { errorOf } from './shared.js';
import type { ConformanceContext } from './types.js';

/** A result the executor cannot store fails the call, is stored as failed and replays at once. */
export function defineExecutorResultLimitTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, define, expect } = ctx;

  describe('executor: result limits', () => {
    define(
      'an oversized or non-JSON result fails the call, is stored as failed (not left in progress), and a retry replays the failure at once without running',
      async ({ store }) => {
        const events: IdempotencyEvent[] = [];
        const idempotency = createIdempotency({
          store,
          maxResultBytes: 1024,
          onEvent: (event) => events.push(event),
        });
        const turn = `turn-${randomUUID()}`;
        const results: Array<[string, () => unknown]> = [
          ['oversized', () => ({ blob: 'x'.repeat(2048) })],
          ['not JSON', () => ({ amount: 10n })],
        ];
        for (const [label, make] of results) {
          const call = { toolName: 'export', turnId: `${turn}-${label}`, args: {} };
          let runs = 0;
          const fn = async () => {
            runs++;
            return make();
          };
          const error = await errorOf(idempotency.run(call, fn));
          expect(PersistFailedError.isInstance(error)).toBe(true);
          expect((error as PersistFailedError).reason).toBe('invalid_result');
          const record = await store.get(idempotency.keyOf(call).key);
          expect(record?.state).toBe('failed');
          events.length = 0;
          const retry = await errorOf(idempotency.run(call, fn));
          // At once: the stored failure replayed, no wait for a lease (no `waited`), whatever
          // the machine's speed.
          expect(events.map((e) => [e.outcome, e.errorCode])).toEqual([
            ['failed', 'replayed_failure'],
          ]);
          expect(ReplayedFailureError.isInstance(retry)).toBe(true);
          expect((retry as ReplayedFailureError).originalCode).toBe('invalid_result');
          expect(runs).toBe(1);
        }
      },
    );
  });
}
