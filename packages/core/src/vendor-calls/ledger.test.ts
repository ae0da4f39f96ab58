import { describe, expect, test as realTest } from 'vitest';
import { InvalidInputError, OutcomeUnknownError, PersistFailedError } from '../errors/index.js';
import {
  createIdempotency,
  type ExecutionContext,
  type IdempotencyOptions,
  type Reconciliation,
} from '../executor.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import { virtual } from '../test-utils/virtual-time.js';
import type { VendorCallPolicy } from './ledger.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A bank with no idempotency: every transfer request moves money; transfers are searchable by reference. */
function bank() {
  const transfers: Array<{ id: string; amount: number; reference: string }> = [];
  return {
    transfers,
    transfer(amount: number, reference: string) {
      const t = { id: `tr_${transfers.length + 1}`, amount, reference };
      transfers.push(t);
      return t;
    },
    find(reference: string) {
      return transfers.find((t) => t.reference === reference);
    },
  };
}

type Transfer = ReturnType<ReturnType<typeof bank>['transfer']>;

function setup(
  options: Partial<IdempotencyOptions> = {},
  store: MemoryStore = createMemoryStore(),
) {
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({
    store,
    onEvent: (e) => events.push(e),
    ...options,
  });
  const vendor = bank();
  const byReference = async ({ key }: { key: string }): Promise<Reconciliation<Transfer>> => {
    const found = vendor.find(key);
    return found === undefined ? { found: false } : { found: true, value: found };
  };
  /** A tool paying out through the ledger. */
  const payout =
    (policy: VendorCallPolicy<Transfer> = { reconcile: byReference }, after?: () => void) =>
    async (args: { amount: number }, ctx: ExecutionContext) => {
      const { value } = await idempotency.vendorCall(
        ctx,
        'bank.transfer',
        (v) => vendor.transfer(args.amount, v.key),
        policy,
      );
      after?.();
      return value.id;
    };
  return { idempotency, store, events, vendor, byReference, payout };
}

const call = (amount = 10, turnId = 'turn-1') => ({
  toolName: 'pay_supplier',
  turnId,
  args: { amount },
});

/** The key of the ledger record of `label` under the tool call `c`. */
function ledgerKey(
  idempotency: ReturnType<typeof setup>['idempotency'],
  c: ReturnType<typeof call>,
  label = 'bank.transfer',
) {
  const parent = idempotency.keyOf(c).key;
  return idempotency.keyOf(
    { toolName: label, turnId: c.turnId, args: {} },
    { businessKey: () => parent },
  );
}

/** A dead attempt: a pending record whose lease has run out. */
async function pending(store: MemoryStore, k: { key: string; fingerprint: string }) {
  await store.claim({
    key: k.key,
    fingerprint: k.fingerprint,
    token: 'dead',
    leaseMs: 1,
    ttlMs: 3_600_000,
  });
  await sleep(5);
}

describe('vendorCall: the ledger for vendors without idempotency', () => {
  test('fresh: a pending record, the call, then its outcome; the key is the derived one', async () => {
    const { idempotency, store, vendor, payout } = setup();
    let seenPending: string | undefined;
    const r = await idempotency.run(call(), async (args, ctx) => {
      const k = ledgerKey(idempotency, call()).key;
      const { value, outcome } = await idempotency.vendorCall(ctx, 'bank.transfer', async (v) => {
        seenPending = (await store.get(k))?.state;
        return vendor.transfer(args.amount, v.key);
      });
      expect(outcome).toBe('executed');
      return value.id;
    });
    expect(r.value).toBe('tr_1');
    const k = ledgerKey(idempotency, call());
    expect(seenPending).toBe('in_progress');
    expect((await store.get(k.key))?.state).toBe('completed');
    expect(vendor.transfers[0]?.reference).toBe(k.key);
    expect((await store.get(k.key))?.meta).toEqual({ toolName: 'bank.transfer', turnId: 'turn-1' });
    // A second label and another tool call get their own records.
    await idempotency.run(call(11), payout());
    expect(vendor.transfers.map((t) => t.reference)).toEqual([
      k.key,
      ledgerKey(idempotency, call(11)).key,
    ]);
    expect(new Set([k.key, ledgerKey(idempotency, call(), 'other').key]).size).toBe(2);
  });

  test('stable across executors ("processes"): the same tool key and label, the same record', () => {
    const a = setup().idempotency;
    const b = setup().idempotency;
    expect(ledgerKey(a, call())).toEqual(ledgerKey(b, call()));
  });

  test('replay: the tool failed after the vendor call; its retry finds the ledger row done', async () => {
    const { idempotency, vendor, payout, events } = setup();
    let failOnce = true;
    const tool = payout(undefined, () => {
      if (failOnce) {
        failOnce = false;
        throw new Error('crm timeout'); // after the transfer: the tool's claim is released
      }
    });
    await expect(idempotency.run(call(), tool)).rejects.toThrow('crm timeout');
    const r = await idempotency.run(call(), tool);
    expect(r).toMatchObject({ value: 'tr_1', replayed: false });
    expect(vendor.transfers).toHaveLength(1);
    expect(events.map((e) => `${e.toolName}:${e.outcome}`)).toEqual([
      'bank.transfer:executed',
      'pay_supplier:failed',
      'bank.transfer:replayed',
      'pay_supplier:executed',
    ]);
  });

  test('the vendor request threw after reaching the vendor: the row is kept, the retry reconciles, no second transfer', async () => {
    const { idempotency, vendor, byReference, events } = setup();
    let timeoutOnce = true;
    const tool = async (args: { amount: number }, ctx: ExecutionContext) => {
      const { value } = await idempotency.vendorCall(
        ctx,
        'bank.transfer',
        (v) => {
          const transfer = vendor.transfer(args.amount, v.key); // the bank did it...
          if (timeoutOnce) {
            timeoutOnce = false;
            throw new Error('ETIMEDOUT'); // ...but the reply was lost
          }
          return transfer;
        },
        { reconcile: byReference },
      );
      return value.id;
    };
    await expect(idempotency.run(call(), tool)).rejects.toThrow('ETIMEDOUT');
    const r = await idempotency.run(call(), tool);
    expect(r.value).toBe('tr_1');
    expect(vendor.transfers).toHaveLength(1);
    expect(events.map((e) => `${e.toolName}:${e.outcome}`)).toContain('bank.transfer:reconciled');
  });

  test("without reconcile, a vendor request that threw is outcome-unknown, never re-sent; onToolError: 'release' opts out", async () => {
    const { idempotency, vendor } = setup();
    const failing =
      (policy: VendorCallPolicy<Transfer>) =>
      async (args: { amount: number }, ctx: ExecutionContext) => {
        const { value } = await idempotency.vendorCall(
          ctx,
          'bank.transfer',
          (v) => {
            if (vendor.transfers.length === 0) {
              vendor.transfer(args.amount, v.key);
              throw new Error('ETIMEDOUT');
            }
            return vendor.transfer(args.amount, v.key);
          },
          policy,
        );
        return value.id;
      };
    await expect(idempotency.run(call(), failing({}))).rejects.toThrow('ETIMEDOUT');
    await expect(idempotency.run(call(), failing({}))).rejects.toSatisfy(
      OutcomeUnknownError.isInstance,
    );
    expect(vendor.transfers).toHaveLength(1);
    // Declared safe to repeat (the error comes before the request leaves): released, retried.
    let refuseOnce = true;
    const early = async (args: { amount: number }, ctx: ExecutionContext) => {
      const { value } = await idempotency.vendorCall(
        ctx,
        'bank.transfer',
        (v) => {
          if (refuseOnce) {
            refuseOnce = false;
            throw new Error('ECONNREFUSED'); // nothing was sent
          }
          return vendor.transfer(args.amount, v.key);
        },
        { onToolError: 'release' },
      );
      return value.id;
    };
    await expect(idempotency.run(call(20, 'turn-2'), early)).rejects.toThrow('ECONNREFUSED');
    await expect(idempotency.run(call(20, 'turn-2'), early)).resolves.toMatchObject({
      value: 'tr_2',
    });
    expect(vendor.transfers).toHaveLength(2);
  });

  test('stale -> reconcile finds the effect at the vendor and adopts it', async () => {
    const { idempotency, store, vendor, payout } = setup({
      onStale: 'reexecute',
      vendorDedupes: true,
    });
    // The dead process: tool and ledger rows pending, the bank did transfer.
    const k = ledgerKey(idempotency, call());
    await pending(store, idempotency.keyOf(call()));
    await pending(store, k);
    vendor.transfer(10, k.key);
    const r = await idempotency.run(call(), payout());
    expect(r).toMatchObject({ value: 'tr_1', outcome: 'executed' });
    expect(vendor.transfers).toHaveLength(1);
    expect((await store.get(k.key))?.state).toBe('completed');
  });

  test('stale -> reconcile says it did not happen -> the call runs', async () => {
    const { idempotency, store, vendor, payout } = setup();
    const k = ledgerKey(idempotency, call());
    await pending(store, k);
    const r = await idempotency.run(call(), payout());
    expect(r.value).toBe('tr_1');
    expect(vendor.transfers).toHaveLength(1);
  });

  test('stale -> reconcile cannot tell (or there is none) -> OutcomeUnknownError; the row stays', async () => {
    const { idempotency, store, vendor, payout, byReference } = setup();
    const k = ledgerKey(idempotency, call());
    await pending(store, k);
    for (const policy of [
      {},
      { reconcile: async () => undefined },
      {
        reconcile: async () => {
          throw new Error('bank search is down');
        },
      },
    ]) {
      await expect(idempotency.run(call(), payout(policy))).rejects.toSatisfy(
        OutcomeUnknownError.isInstance,
      );
    }
    expect(vendor.transfers).toHaveLength(0);
    expect((await store.get(k.key))?.state).toBe('in_progress');
    // The tool's own claim was released: once the bank can answer, a retry settles it.
    vendor.transfer(10, k.key);
    const r = await idempotency.run(call(), payout({ reconcile: byReference }));
    expect(r.value).toBe('tr_1');
    expect(vendor.transfers).toHaveLength(1);
  });

  test("stale -> 'reexecute' needs the declaration; the executor's default does not leak in", async () => {
    const { idempotency, store, vendor, payout } = setup({
      onStale: 'reexecute',
      vendorDedupes: true,
    });
    const k = ledgerKey(idempotency, call());
    await pending(store, k);
    // The executor re-executes stale tools, but a ledger call stays outcome-unknown by default.
    await expect(idempotency.run(call(), payout({}))).rejects.toSatisfy(
      OutcomeUnknownError.isInstance,
    );
    await expect(idempotency.run(call(), payout({ onStale: 'reexecute' }))).rejects.toSatisfy(
      (e) => InvalidInputError.isInstance(e) && e.field === 'onStale',
    );
    expect(vendor.transfers).toHaveLength(0);
    const r = await idempotency.run(call(), payout({ onStale: 'reexecute', vendorDedupes: true }));
    expect(r.value).toBe('tr_1');
  });

  test('a ledger call outside a tool, with a bad label or fn: typed errors; nothing runs', async () => {
    const { idempotency, vendor } = setup();
    const fn = () => vendor.transfer(1, 'x');
    await expect(idempotency.vendorCall(undefined, 'bank', fn)).rejects.toThrow(/inside a tool/);
    const ctx: ExecutionContext = {
      key: 'v1_k',
      toolName: 't',
      turnId: 'turn',
      scope: undefined,
      signal: new AbortController().signal,
      stillOwned: () => true,
    };
    for (const label of ['', 'x'.repeat(129), 5 as never]) {
      await expect(idempotency.vendorCall(ctx, label, fn)).rejects.toSatisfy(
        (e) => InvalidInputError.isInstance(e) && e.field === 'label',
      );
    }
    await expect(idempotency.vendorCall(ctx, 'bank', 'fn' as never)).rejects.toSatisfy(
      (e) => InvalidInputError.isInstance(e) && e.field === 'fn',
    );
    expect(vendor.transfers).toHaveLength(0);
    // With the current context (no ctx handed down):
    const r = await idempotency.run(call(), async () => {
      const { value } = await idempotency.vendorCall(undefined, 'bank.transfer', (v) =>
        vendor.transfer(1, v.key),
      );
      return value.reference;
    });
    expect(r.value).toBe(ledgerKey(idempotency, call()).key);
  });

  test('the tool lost its claim: no vendor call starts; a running one sees the abort', async () => {
    const { idempotency, vendor } = setup();
    const parent = new AbortController();
    const ctx: ExecutionContext = {
      key: 'v1_k',
      toolName: 't',
      turnId: 'turn',
      scope: undefined,
      signal: parent.signal,
      stillOwned: () => !parent.signal.aborted,
    };
    let signal: AbortSignal | undefined;
    await idempotency.vendorCall(ctx, 'first', async (v) => {
      signal = v.signal;
      parent.abort(new PersistFailedError({ reason: 'lease_lost', message: 'taken over' }));
    });
    expect(signal?.aborted).toBe(true);
    await expect(
      idempotency.vendorCall(ctx, 'second', () => vendor.transfer(1, 'x')),
    ).rejects.toSatisfy(PersistFailedError.isInstance);
    expect(vendor.transfers).toHaveLength(0);
  });
});

describe('one label names one vendor call of an attempt', () => {
  test('a loop reusing a label is refused (never the first call result for the second); labels per recipient each run once, and replay on a retry', async () => {
    const { idempotency, vendor } = setup();
    const recipients = ['ann', 'bob'];
    let failAfterSending = false;
    const sendAll =
      (label: (to: string) => string) => async (_: unknown, ctx: ExecutionContext) => {
        const ids: { id: string; replayed: boolean }[] = [];
        for (const to of recipients) {
          const { value, replayed } = await idempotency.vendorCall(ctx, label(to), (v) =>
            vendor.transfer(1, `${to}:${v.key}`),
          );
          ids.push({ id: value.id, replayed });
        }
        if (failAfterSending) throw new Error('the process lost the reply');
        return ids;
      };
    const reused = idempotency.run(
      { toolName: 'notify', turnId: 't1', args: {} },
      sendAll(() => 'mail.send'),
    );
    await expect(reused).rejects.toMatchObject({ code: 'configuration', option: 'label' });
    expect(vendor.transfers.map((t) => t.reference.split(':')[0])).toEqual(['ann']);

    const call = { toolName: 'notify', turnId: 't2', args: {} };
    const perRecipient = sendAll((to) => `mail.send:${to}`);
    failAfterSending = true;
    await expect(idempotency.run(call, perRecipient)).rejects.toThrow(/lost the reply/);
    expect(vendor.transfers.slice(1).map((t) => t.reference.split(':')[0])).toEqual(['ann', 'bob']);
    // The next attempt of the tool call: each vendor call meets its own ledger record.
    failAfterSending = false;
    const again = await idempotency.run(call, perRecipient);
    expect(again.replayed).toBe(false);
    expect(again.value).toEqual([
      { id: 'tr_2', replayed: true },
      { id: 'tr_3', replayed: true },
    ]);
    expect(vendor.transfers).toHaveLength(3);
  });

  test('a vendor call that threw may be tried again under its label in the same attempt', async () => {
    const { idempotency, vendor } = setup();
    let tries = 0;
    const result = await idempotency.run(
      { toolName: 'pay', turnId: 't', args: {} },
      async (_, ctx) => {
        for (;;) {
          try {
            return (
              await idempotency.vendorCall(
                ctx,
                'bank.transfer',
                (v) => {
                  if (++tries === 1) throw new Error('connection refused before sending');
                  return vendor.transfer(5, v.key);
                },
                { onToolError: 'release' },
              )
            ).value.id;
          } catch (error) {
            if (tries > 1) throw error;
          }
        }
      },
    );
    expect(result.value).toBe('tr_1');
    expect(tries).toBe(2);
  });
});
