import { createIdempotency, StoreUnavailableError } from '@idempotent-tools/core';
import { runStoreFuzz } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import { createDynamoDbStore } from './index.js';
import { newClient, startEngine, testPrefix } from './test-utils/engine.js';

// Hostile strings against the engine (expression syntax, NUL, lone surrogates, ...), and
// fail-closed / fail-open when DynamoDB cannot be reached.

const engine = await startEngine();
const client = engine.client();
const table = await engine.table('fuzz');
afterAll(async () => {
  client.destroy();
  await engine.stop();
});

runStoreFuzz({
  name: `dynamodb store on ${engine.kind}`,
  describe,
  test,
  expect,
  runs: Number(process.env.FUZZ_RUNS) || 100,
  createStore: () => createDynamoDbStore({ client, tableName: table, prefix: testPrefix('fuzz') }),
});

describe('dynamodb store: DynamoDB unreachable', () => {
  test('fail-closed by default; fail-open runs the tool unguarded and says so', async () => {
    // Nothing listens on port 1: every request fails at once.
    const down = newClient('http://127.0.0.1:1', { maxAttempts: 1 });
    const store = createDynamoDbStore({ client: down, tableName: 'idempotency' });
    const events: string[] = [];
    let runs = 0;
    const fn = async () => ++runs;
    const call = { toolName: 'lookup', turnId: 't1', args: {} };
    const closed = createIdempotency({ store, onEvent: (e) => events.push(e.outcome) });
    const error = await closed.run(call, fn).catch((e: unknown) => e);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/DynamoDB idempotency store failed during claim/);
    expect(runs).toBe(0);
    const open = createIdempotency({
      store,
      onStoreUnavailable: 'fail-open',
      onEvent: (e) => events.push(e.outcome),
    });
    expect(await open.run(call, fn)).toMatchObject({ value: 1, outcome: 'unguarded' });
    expect(events).toEqual(['store-unavailable', 'unguarded']);
    await expect(store.list()).rejects.toSatisfy(StoreUnavailableError.isInstance);
    await expect(store.stats()).rejects.toSatisfy(StoreUnavailableError.isInstance);
    down.destroy();
  });
});
