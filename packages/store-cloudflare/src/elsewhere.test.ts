/**
 * The package outside workerd (here Node): its `default` export condition loads the client
 * alone, and an `IdempotencyObject` that says how to load the workerd build.
 */
import { ConfigurationError } from '@idempotent-tools/core';
import { afterAll, expect, test } from 'vitest';
import { startEngine } from './test-utils/engine.js';

const engine = await startEngine();
afterAll(() => engine.dispose());

test('in Node the package loads; IdempotencyObject throws a ConfigurationError naming the workerd condition', async () => {
  const module = await import('@idempotent-tools/store-cloudflare');
  expect(typeof module.createDurableObjectStore).toBe('function');
  let error: unknown;
  try {
    new (module.IdempotencyObject as unknown as new () => unknown)();
  } catch (e) {
    error = e;
  }
  expect(ConfigurationError.isInstance(error)).toBe(true);
  expect((error as Error).message).toMatch(/'workerd' export condition/);
});

test('in Node the client works over a namespace that miniflare hands out', async () => {
  const { createDurableObjectStore } = await import('@idempotent-tools/store-cloudflare');
  const namespace = await engine.mf.getDurableObjectNamespace('IDEMPOTENCY');
  const store = createDurableObjectStore(namespace as never, { prefix: `node-${Date.now()}:` });
  const input = {
    key: 'from-node',
    fingerprint: 'fp',
    token: 't1',
    leaseMs: 30_000,
    ttlMs: 60_000,
  };
  expect((await store.claim(input)).status).toBe('acquired');
  expect(
    await store.complete({
      key: 'from-node',
      token: 't1',
      state: 'completed',
      outcome: '1',
      ttlMs: 60_000,
    }),
  ).toBe(true);
  const again = await store.claim({ ...input, token: 't2' });
  expect(again.status).toBe('completed');
});
