import { runStoreConformance } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { startEngine } from './test-utils/engine.js';

// The store runs inside workerd (miniflare): the real IdempotencyObject with SQLite storage and
// the real client, driven from here through the test Worker (test-utils/). Each test's store
// has a prefix of its own, so its objects (and list, stats, purgeExpired) see only its records.
const engine = await startEngine();
afterAll(() => engine.dispose());

runStoreConformance({
  name: 'durable object store in workerd (real clock)',
  describe,
  test,
  expect,
  clock: 'real',
  createStore: ({ timeoutMs }) => engine.store({ timeoutMs }),
  raw: { count: (store) => engine.count(store) },
  corruptRecord: async (store, key) => {
    const far = Date.now() + 3_600_000;
    await engine.sql(
      engine.objectOf(store, key),
      `INSERT OR REPLACE INTO idempotency_records (key, state, fingerprint, token, lease_expires_at, expires_at, created_at)
       VALUES (?, 'not a record', 'fp', 'token', ?, ?, ?)`,
      key,
      far,
      far,
      Date.now(),
    );
  },
});
