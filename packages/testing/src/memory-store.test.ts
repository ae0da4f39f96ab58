import { createMemoryStore } from '@idempotent-tools/core';
import { describe, expect, test } from 'vitest';
import { runStoreConformance } from './index.js';

runStoreConformance({
  name: 'memory store, virtual clock',
  describe,
  test,
  expect,
  clock: 'virtual',
  createStore: ({ clock }) => createMemoryStore({ now: clock.now }),
  raw: { count: async (store) => store.size },
});

runStoreConformance({
  name: 'memory store, real clock',
  describe,
  test,
  expect,
  clock: 'real',
  createStore: () => createMemoryStore(),
  raw: { count: async (store) => store.size },
});
