import { createMemoryStore } from '@idempotent-tools/core';
import { describe, expect, test } from 'vitest';
import { runStoreFuzz } from './index.js';

runStoreFuzz({
  name: 'memory store',
  describe,
  test,
  expect,
  runs: 200,
  createStore: () => createMemoryStore(),
});
