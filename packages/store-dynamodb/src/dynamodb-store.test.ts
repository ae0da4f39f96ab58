import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  type AttributeValue,
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  InvalidInputError,
  RecordIntegrityError,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { runStoreConformance, uniqueKey, waitFor } from '@idempotent-tools/testing';
import { afterAll, describe, expect, test } from 'vitest';
import {
  createDynamoDbStore,
  createIdempotency,
  type DynamoDbStore,
  type DynamoDbStoreOptions,
  ensureTable,
  tableDefinition,
} from './index.js';
import { startAllOldProxy } from './test-utils/all-old-proxy.js';
import {
  countItems,
  idOf,
  newClient,
  putRaw,
  startEngine,
  testPrefix,
} from './test-utils/engine.js';

const engine = await startEngine();
const client = engine.client();
const table = await engine.table('store');
const returnsItem = await probeReturnsItem();
afterAll(async () => {
  client.destroy();
  await engine.stop();
});

const raw = { count: (store: DynamoDbStore) => countItems(client, store) };
const corruptRecord = (store: DynamoDbStore, key: string) =>
  putRaw(client, store, key, { state: { S: 'not a record' } });

// The store's clock is the client's (DynamoDB has none usable in a condition), so a virtual
// clock makes every lease and ttl clause exact, with no sleeping.
runStoreConformance({
  name: `dynamodb store on ${engine.kind} (virtual clock)`,
  describe,
  test,
  expect,
  clock: 'virtual',
  createStore: ({ clock, timeoutMs }) =>
    createDynamoDbStore({
      client,
      tableName: table,
      prefix: testPrefix('v'),
      now: clock.now,
      timeoutMs,
    }),
  raw,
  corruptRecord,
});

runStoreConformance({
  name: `dynamodb store on ${engine.kind} (real clock)`,
  describe,
  test,
  expect,
  clock: 'real',
  createStore: ({ timeoutMs }) =>
    createDynamoDbStore({ client, tableName: table, prefix: testPrefix('r'), timeoutMs }),
  raw,
  corruptRecord,
});

/** A client that records the DynamoDB operation of every HTTP request it sends. */
function countingClient(endpoint?: string) {
  const counted = endpoint === undefined ? engine.client() : newClient(endpoint);
  const sent: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  counted.middlewareStack.add(
    (next, context) => async (args) => {
      sent.push(String(context.commandName).replace(/Command$/, ''));
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        return await next(args);
      } finally {
        inFlight--;
      }
    },
    { step: 'deserialize', name: 'countRequests' },
  );
  return { client: counted, sent, maxInFlight: () => maxInFlight };
}

const claimInput = (key: string, token: string = randomUUID()) => ({
  key,
  fingerprint: 'fp',
  token,
  leaseMs: 30_000,
  ttlMs: 60_000,
});

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (e: unknown) => e,
  );

const newStore = (options: Partial<DynamoDbStoreOptions> = {}) =>
  createDynamoDbStore({ client, tableName: table, prefix: testPrefix('s'), ...options });

describe('dynamodb store: options', () => {
  test('defaults: no prefix, name dynamodb, durable, waiters woken by the store poll, outcomes within an item', () => {
    const store = createDynamoDbStore({ client, tableName: table });
    expect(store.prefix).toBe('');
    expect(store.name).toBe('dynamodb');
    expect(store.capabilities).toEqual({
      notifiesChanges: true,
      durable: true,
      maxOutcomeBytes: 400 * 1024 - 8 * 1024,
    });
    expect(typeof store.waitForChange).toBe('function');
  });

  test.each([
    ['client', { client: {} }],
    ['client', { client: undefined }],
    ['tableName', { tableName: 'ab' }],
    ['tableName', { tableName: 'has space' }],
    ['prefix', { prefix: 'x'.repeat(101) }],
    ['prefix', { prefix: 'a\ud800' }],
    ['prefix', { prefix: 'app#1' }],
    ['now', { now: 5 }],
    ['maxPollMs', { maxPollMs: 0 }],
    ['maxPollMs', { maxPollMs: 1.5 }],
  ])('rejects a bad %s', (field, options) => {
    let error: unknown;
    try {
      createDynamoDbStore({ client, tableName: table, ...(options as object) } as never);
    } catch (e) {
      error = e;
    }
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe(field);
  });
});

describe('dynamodb store: items', () => {
  test('a record is one item at id = prefix + key; ttl (seconds) never before expiresAt', async () => {
    const store = newStore();
    const key = uniqueKey('layout');
    const owner = claimInput(key);
    await store.claim({ ...owner, meta: { toolName: 'charge', scope: 's', turnId: 't' } });
    const running = await getRaw(store, key);
    expect(running).toMatchObject({
      id: { S: `${store.prefix}#${key}` },
      state: { S: 'in_progress' },
      token: { S: owner.token },
      fingerprint: { S: 'fp' },
      toolName: { S: 'charge' },
      scope: { S: 's' },
      turnId: { S: 't' },
    });
    const num = (item: Record<string, AttributeValue>, name: string) => Number(item[name]?.N);
    expect(num(running, 'expiresAt')).toBe(num(running, 'leaseExpiresAt') + num(running, 'keepMs'));
    expect(num(running, 'ttl') * 1000).toBeGreaterThanOrEqual(num(running, 'expiresAt'));

    // renew moves expiresAt and ttl with the lease, in one update.
    expect(await store.renew(key, owner.token, 90_000)).toBe(true);
    const renewed = await getRaw(store, key);
    expect(num(renewed, 'leaseExpiresAt')).toBeGreaterThan(num(running, 'leaseExpiresAt'));
    expect(num(renewed, 'expiresAt')).toBe(num(renewed, 'leaseExpiresAt') + num(renewed, 'keepMs'));
    expect(num(renewed, 'ttl') * 1000).toBeGreaterThanOrEqual(num(renewed, 'expiresAt'));

    const outcome = '"ok" ü\n';
    await store.complete({ key, token: owner.token, state: 'completed', outcome, ttlMs: 5_000 });
    const done = await getRaw(store, key);
    expect(done).toMatchObject({ state: { S: 'completed' }, outcome: { S: outcome } });
    expect(num(done, 'outcomeBytes')).toBe(Buffer.byteLength(outcome));
    expect(num(done, 'expiresAt') - num(done, 'completedAt')).toBe(5_000);
    expect(num(done, 'ttl')).toBe(Math.ceil(num(done, 'expiresAt') / 1000));
    expect(done.keepMs).toBeUndefined();
    expect(done.keepSeconds).toBeUndefined();
  });

  test('an outcome over the item limit is refused before any request, and the claim stays', async () => {
    const { client: counted, sent } = countingClient();
    const store = createDynamoDbStore({
      client: counted,
      tableName: table,
      prefix: testPrefix('big'),
    });
    const key = uniqueKey('big');
    const owner = claimInput(key);
    await store.claim(owner);
    sent.length = 0;
    const error = await errorOf(
      store.complete({
        key,
        token: owner.token,
        state: 'completed',
        outcome: 'x'.repeat(400 * 1024),
        ttlMs: 60_000,
      }),
    );
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('outcome');
    expect((error as Error).message).toMatch(/maxResultBytes/);
    expect(sent).toEqual([]);
    expect((await store.get(key))?.state).toBe('in_progress');
    counted.destroy();
  });

  test('a 500 KB result with the default maxResultBytes: it fails at once naming the option, is kept as a failure, and a retry replays it (before the fix: re-sent for a lease, then outcome_unknown)', async () => {
    const store = newStore();
    expect(store.capabilities.maxOutcomeBytes).toBeLessThan(400 * 1024);
    const idempotency = createIdempotency({ store });
    const call = { toolName: 'export', turnId: uniqueKey('turn'), args: {} };
    let runs = 0;
    const big = async () => {
      runs++;
      return 'x'.repeat(500 * 1024);
    };
    const first = await errorOf(idempotency.run(call, big));
    expect(first).toMatchObject({ code: 'persist_failed', reason: 'invalid_result' });
    expect((first as Error).message).toMatch(
      /dynamodb store holds at most \d+ bytes.*maxResultBytes/,
    );
    const retry = await errorOf(idempotency.run(call, big));
    expect(retry).toMatchObject({ code: 'replayed_failure', originalCode: 'invalid_result' });
    expect(runs).toBe(1);
  });

  test('items the store cannot read are RecordIntegrityError (corrupt); fail-open never runs the tool', async () => {
    const store = newStore();
    const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
    const later = String(Date.now() + 3_600_000);
    const variants: Array<[string, Record<string, AttributeValue>]> = [
      ['no attributes', {}],
      ['an unknown state', { state: { S: 'done' } }],
      [
        'times that are strings',
        {
          state: { S: 'completed' },
          fingerprint: { S: 'fp' },
          token: { S: 't' },
          leaseExpiresAt: { S: '1' },
          expiresAt: { N: later },
          createdAt: { N: '1' },
          completedAt: { N: '1' },
          outcome: { S: '1' },
        },
      ],
      [
        'a finished record without its outcome',
        {
          state: { S: 'completed' },
          fingerprint: { S: 'fp' },
          token: { S: 't' },
          leaseExpiresAt: { N: '1' },
          expiresAt: { N: later },
          createdAt: { N: '1' },
          completedAt: { N: '1' },
        },
      ],
    ];
    for (const [label, attributes] of variants) {
      const key = uniqueKey('corrupt');
      await putRaw(client, store, key, attributes);
      for (const op of [() => store.claim(claimInput(key)), () => store.get(key)]) {
        const error = await errorOf(op());
        expect(RecordIntegrityError.isInstance(error), label).toBe(true);
        expect((error as RecordIntegrityError).reason).toBe('corrupt');
        expect((error as Error).message).toContain(`${store.prefix}#${key}`);
      }
      let runs = 0;
      const call = { toolName: 't', turnId: uniqueKey('turn'), args: {} };
      await putRaw(client, store, idempotency.keyOf(call).key, attributes);
      const error = await errorOf(idempotency.run(call, () => ++runs));
      expect(RecordIntegrityError.isInstance(error), label).toBe(true);
      expect(runs).toBe(0);
    }
  });

  test('stores with different prefixes share a table and never see each other', async () => {
    const prefix = testPrefix('shared');
    const a = createDynamoDbStore({ client, tableName: table, prefix });
    // A neighbour whose prefix starts with ours.
    const b = createDynamoDbStore({ client, tableName: table, prefix: `${prefix}x` });
    const key = 'same-key';
    const owner = claimInput(key);
    expect((await a.claim(owner)).status).toBe('acquired');
    expect((await b.claim(claimInput(key))).status).toBe('acquired');
    expect(await b.release(key, owner.token)).toBe(false);
    expect(await getRaw(a, key)).toMatchObject({ id: { S: `${prefix}#${key}` } });
    expect((await a.list()).records.map((r) => r.key)).toEqual([key]);
    expect((await b.list()).records.map((r) => r.key)).toEqual([key]);
    expect(await a.stats()).toMatchObject({ records: 1, inProgress: 1 });
    expect(await b.stats()).toMatchObject({ records: 1 });
    expect(await a.purgeExpired()).toBe(0);
  });
});

describe('dynamodb store: requests', () => {
  test('a fresh call is PutItem + UpdateItem; a replay one PutItem (plus a GetItem on engines that leave the item out of the error)', async () => {
    const { client: counted, sent } = countingClient();
    try {
      const store = createDynamoDbStore({
        client: counted,
        tableName: table,
        prefix: testPrefix('cost'),
      });
      const idempotency = createIdempotency({ store });
      const call = { toolName: 'charge', turnId: uniqueKey('turn'), args: { amount: 5 } };
      const fresh = await idempotency.run(call, () => ({ id: 'ch_1' }));
      expect(fresh.replayed).toBe(false);
      expect(sent).toEqual(['PutItem', 'UpdateItem']);
      sent.length = 0;
      const replay = await idempotency.run(call, () => ({ id: 'ch_2' }));
      expect(replay).toMatchObject({ replayed: true, value: { id: 'ch_1' } });
      // dynalite 4 does not send the item with a failed condition: one consistent read follows.
      expect(sent).toEqual(returnsItem ? ['PutItem'] : ['PutItem', 'GetItem']);
    } finally {
      counted.destroy();
    }
  });

  test('with the item in the error (as DynamoDB sends it), a replay and a resent complete are one request each', async () => {
    const proxy = engine.kind === 'dynalite' ? await startAllOldProxy(engine.endpoint) : undefined;
    const { client: counted, sent } = countingClient(proxy?.endpoint ?? engine.endpoint);
    try {
      const store = createDynamoDbStore({
        client: counted,
        tableName: table,
        prefix: testPrefix('old'),
      });
      const key = uniqueKey('old');
      const owner = claimInput(key);
      await store.claim(owner);
      const done = {
        key,
        token: owner.token,
        state: 'completed' as const,
        outcome: '"x"',
        ttlMs: 60_000,
      };
      expect(await store.complete(done)).toBe(true);
      sent.length = 0;
      expect(await store.complete(done)).toBe(true); // its reply was lost: sent again
      expect(await store.complete({ ...done, outcome: '"y"' })).toBe(false);
      expect(await store.claim(claimInput(key))).toMatchObject({
        status: 'completed',
        record: { outcome: '"x"', token: owner.token },
      });
      expect(await store.claim({ ...claimInput(key), fingerprint: 'other' })).toMatchObject({
        status: 'drift',
      });
      expect(sent).toEqual(['UpdateItem', 'UpdateItem', 'PutItem', 'PutItem']);
    } finally {
      counted.destroy();
      await proxy?.stop();
    }
  });

  test('waiters of one key share one poll loop: one GetItem in flight, woken by a takeover too', async () => {
    const { client: counted, sent, maxInFlight } = countingClient();
    try {
      const prefix = testPrefix('poll');
      const waiter = createDynamoDbStore({
        client: counted,
        tableName: table,
        prefix,
        maxPollMs: 50,
      });
      const owner = createDynamoDbStore({
        client,
        tableName: table,
        prefix,
        now: () => Date.now() + 30_000,
      });
      const key = uniqueKey('poll');
      const first = claimInput(key);
      await waiter.claim({ ...first, leaseMs: 1_000 });
      sent.length = 0;
      const waits = Array.from({ length: 50 }, () => waiter.waitForChange(key, 60_000));
      await waitFor('the first look', async () => sent.length > 0);
      // The owner's clock is 30 s ahead: for it the 1 s lease has run out.
      expect(
        await owner.takeover({
          key,
          staleToken: first.token,
          token: randomUUID(),
          leaseMs: 30_000,
          ttlMs: 60_000,
        }),
      ).toBe(true);
      await Promise.all(waits);
      expect(maxInFlight()).toBe(1);
      expect(new Set(sent)).toEqual(new Set(['GetItem']));
      await waiter.close();
    } finally {
      counted.destroy();
    }
  });
});

describe('dynamodb store: the table', () => {
  test('ensureTable creates the table once, enables TTL where the engine has it', async () => {
    const name = `idem-test-ensure-${randomUUID().slice(0, 8)}`;
    try {
      const first = await ensureTable(client, name);
      expect(first.created).toBe(true);
      expect(first.ttl).toBe(engine.kind === 'dynalite' ? 'unsupported' : 'enabled');
      const again = await Promise.all([ensureTable(client, name), ensureTable(client, name)]);
      expect(again.map((r) => r.created)).toEqual([false, false]);
      const store = createDynamoDbStore({ client, tableName: name });
      expect((await store.claim(claimInput('k'))).status).toBe('acquired');
    } finally {
      await client.send(new DeleteTableCommand({ TableName: name })).catch(() => {});
    }
  });

  test('ensureTable refuses a table with another key schema', async () => {
    const name = `idem-test-other-${randomUUID().slice(0, 8)}`;
    await client.send(
      new CreateTableCommand({
        ...tableDefinition(name),
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    try {
      const error = await errorOf(ensureTable(client, name));
      expect(InvalidInputError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/partition key "id"/);
      // The store on such a table: DynamoDB refuses the request, nothing runs, not fail-open.
      const store = createDynamoDbStore({ client, tableName: name });
      let runs = 0;
      const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
      const run = await errorOf(
        idempotency.run({ toolName: 't', turnId: 'x', args: {} }, () => ++runs),
      );
      expect(InvalidInputError.isInstance(run)).toBe(true);
      expect(runs).toBe(0);
    } finally {
      await client.send(new DeleteTableCommand({ TableName: name })).catch(() => {});
    }
  });

  test('a missing table is StoreUnavailableError naming ensureTable', async () => {
    const store = createDynamoDbStore({ client, tableName: `idem-test-missing-${randomUUID()}` });
    const error = await errorOf(store.claim(claimInput('k')));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/ensureTable/);
  });

  test('table/table.json is tableDefinition; cloudformation.yaml has the same key and the ttl attribute', () => {
    const dir = new URL('../table/', import.meta.url);
    const json = JSON.parse(readFileSync(new URL('table.json', dir), 'utf8')) as unknown;
    expect(json).toEqual(tableDefinition('idempotency'));
    const yaml = readFileSync(new URL('cloudformation.yaml', dir), 'utf8');
    expect(yaml).toMatch(/AttributeName: id\n\s+AttributeType: S/);
    expect(yaml).toMatch(/AttributeName: id\n\s+KeyType: HASH/);
    expect(yaml).toMatch(/BillingMode: PAY_PER_REQUEST/);
    expect(yaml).toMatch(/TimeToLiveSpecification:\n\s+AttributeName: ttl\n\s+Enabled: true/);
  });
});

/** The item under the store's key, read with the engine's own client. */
async function getRaw(store: DynamoDbStore, key: string): Promise<Record<string, AttributeValue>> {
  const reply = await client.send(
    new GetItemCommand({
      TableName: store.tableName,
      Key: { id: { S: idOf(store, key) } },
      ConsistentRead: true,
    }),
  );
  if (reply.Item === undefined) throw new Error(`no item at ${idOf(store, key)}`);
  return reply.Item;
}

/** Whether the engine returns the item with a failed condition (DynamoDB does; dynalite 4 not). */
async function probeReturnsItem(): Promise<boolean> {
  const id = { S: `probe-${randomUUID()}` };
  await client.send(new PutItemCommand({ TableName: table, Item: { id } }));
  try {
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: { id },
        ConditionExpression: 'attribute_not_exists(id)',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    throw new Error('the probe condition did not fail');
  } catch (error) {
    return (error as { Item?: unknown }).Item !== undefined;
  } finally {
    await client.send(new DeleteItemCommand({ TableName: table, Key: { id } }));
  }
}
