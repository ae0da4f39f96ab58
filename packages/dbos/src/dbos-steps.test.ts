/**
 * idempotentStep's identity in real DBOS, launched in this process (its system database a
 * throwaway database on the local PostgreSQL): the workflow id and the step's function id.
 */
import { randomUUID } from 'node:crypto';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { serviceAvailable } from '@idempotent-tools/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  currentExecutionContext,
  idempotentStep,
} from './index.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const database = `dbos_test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
const systemUrl = new URL(DATABASE_URL);
systemUrl.pathname = `/${database}`;
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
admin.on('error', () => {});
const postgresUp = await serviceAvailable({
  name: 'PostgreSQL',
  url: DATABASE_URL,
  probe: () => admin.query('SELECT 1'),
});

type Order = { id: string; amount: number };
const store = createMemoryStore();
const idempotency = createIdempotency({ store });
const sent: string[] = []; // the Idempotency-Key of every charge the vendor took
const charge = idempotentStep(
  'charge',
  (order: Order) => {
    const key = currentExecutionContext()?.key as string;
    sent.push(key);
    return { chargeId: `ch_${order.id}_${sent.length}` };
  },
  { idempotency },
);
const twice = DBOS.registerWorkflow(
  async (order: Order) => [await charge(order), await charge(order)],
  {
    name: 'twice',
  },
);
const once = DBOS.registerWorkflow(async (order: Order) => charge(order), { name: 'once' });

let failFirst = true;
const flaky = idempotentStep(
  'flaky_charge',
  (order: Order) => {
    if (failFirst) {
      failFirst = false;
      throw new Error('the bank is down (before any charge)');
    }
    sent.push(currentExecutionContext()?.key as string);
    return { chargeId: `ch_${order.id}` };
  },
  {
    idempotency,
    policy: { onToolError: 'release' },
    step: { retriesAllowed: true, intervalSeconds: 0.01 },
  },
);
const retried = DBOS.registerWorkflow(async (order: Order) => flaky(order), { name: 'retried' });

beforeAll(async () => {
  if (!postgresUp) return;
  await admin.query(`CREATE DATABASE ${database}`);
  DBOS.setConfig({ name: 'dbos-steps-test', systemDatabaseUrl: systemUrl.href, logLevel: 'error' });
  await DBOS.launch();
});
afterAll(async () => {
  if (postgresUp) {
    await DBOS.shutdown();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
  await admin.end();
});

describe.skipIf(!postgresUp)('idempotentStep: the call is the workflow and the step', () => {
  const order: Order = { id: 'o-1', amount: 40 };

  test('two calls with the same arguments in one workflow are two steps: two charges, two keys', async () => {
    sent.length = 0;
    const [first, second] = await twice(order);
    expect(first).not.toEqual(second);
    expect(sent).toHaveLength(2);
    expect(new Set(sent).size).toBe(2);
  });

  test('a workflow started again with its id: DBOS answers from its checkpoint; a fork is a new call', async () => {
    sent.length = 0;
    const workflowID = `once-${randomUUID()}`;
    const first = await DBOS.withNextWorkflowID(workflowID, () => once(order));
    expect(await DBOS.withNextWorkflowID(workflowID, () => once(order))).toEqual(first);
    expect(sent).toHaveLength(1);
    // A fork re-runs the workflow from its first step under a new workflow id: a deliberate re-run.
    const forked = await DBOS.forkWorkflow<typeof first>(workflowID, 0);
    expect(await forked.getResult()).not.toEqual(first);
    expect(sent).toHaveLength(2);
    expect(sent[1]).not.toBe(sent[0]);
  });

  test('two workflows with the same arguments are two calls', async () => {
    sent.length = 0;
    await once(order);
    await once(order);
    expect(sent).toHaveLength(2);
    expect(sent[1]).not.toBe(sent[0]);
  });

  test('called outside a workflow (a plain function call in DBOS): refused, nothing runs', async () => {
    sent.length = 0;
    const error = await charge(order).catch((e: unknown) => e);
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/DBOS workflow/);
    expect(sent).toHaveLength(0);
  });

  test('a DBOS step retry (retriesAllowed) after an error before the effect runs it: one charge', async () => {
    sent.length = 0;
    expect(await retried(order)).toEqual({ chargeId: 'ch_o-1' });
    expect(sent).toHaveLength(1);
  });

  test('a bad step name is refused when the step is made', () => {
    expect(() => idempotentStep('charge card', async () => 1, { idempotency })).toThrow(
      ConfigurationError,
    );
  });
});
