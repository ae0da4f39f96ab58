import type { IdempotencyStore } from '@idempotent-tools/core';
import type { ConformanceContext } from './types.js';

/** The store declares what it is: `specificationVersion`, a name, capability flags. */
export function defineStoreIdentityTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define } = ctx;

  describe('store identity', () => {
    define(
      'declares specificationVersion v1, a name and boolean capabilities',
      async ({ store }) => {
        expect(store.specificationVersion).toBe('v1');
        expect(typeof store.name).toBe('string');
        expect(store.name.length).toBeGreaterThan(0);
        expect(typeof store.capabilities).toBe('object');
        expect(typeof store.capabilities.notifiesChanges).toBe('boolean');
        expect(typeof store.capabilities.durable).toBe('boolean');
      },
    );
  });
}
