/**
 * `withLocalCache` (core) in front of a real store: the wrapped store still passes the whole
 * store conformance suite, on the memory store and on SQLite (node:sqlite), with the virtual and
 * the real clock. Core cannot import the suite (testing depends on core), so it runs here.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryStore, type MemoryStore, withLocalCache } from '@idempotent-tools/core';
import { runStoreConformance } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { openSqliteStore, type SqliteStore } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'local-cache-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'cache.db');
const table = () => `t_${randomUUID().replaceAll('-', '')}`;

for (const clock of ['virtual', 'real'] as const) {
  runStoreConformance({
    name: `memory store + local cache, ${clock} clock`,
    describe,
    test,
    expect,
    clock,
    createStore: ({ clock: c }) =>
      clock === 'virtual'
        ? withLocalCache(createMemoryStore({ now: c.now }), { now: c.now })
        : withLocalCache(createMemoryStore()),
    raw: { count: async (store) => (store.inner as MemoryStore).size },
  });
  runStoreConformance({
    name: `sqlite store (node:sqlite) + local cache, ${clock} clock`,
    describe,
    test,
    expect,
    clock,
    createStore: async ({ clock: c }) =>
      withLocalCache(
        await openSqliteStore(file, {
          table: table(),
          ...(clock === 'virtual' ? { now: c.now } : {}),
        }),
        clock === 'virtual' ? { now: c.now } : {},
      ),
    raw: {
      count: async (store) => {
        const s = store.inner as SqliteStore;
        const row = s.database.prepare(`SELECT count(*) AS n FROM "${s.table}"`).get();
        return Number((row as { n: number }).n);
      },
    },
  });
}
