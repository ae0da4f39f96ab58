import { describe, expect, test as realTest } from 'vitest';
import { createIdempotency, type IdempotencyOptions } from '../executor.js';
import { canonicalize } from '../keys/canonicalize.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { CALL_OUTCOMES, isReplay } from '../observe/events.js';
import { createMemoryStore, type MemoryStore } from '../store/memory-store.js';
import type { IdempotencyStore } from '../store/store.js';
import { virtual } from '../test-utils/virtual-time.js';

/** Every case here runs on virtual time (the memory store, no sockets): see virtual-time.ts. */
const test = (name: string, body: () => Promise<void> | void) => realTest(name, virtual(body));

/**
 * design section 9 (docs/design.md): every call whose key could be derived emits exactly one event, on every path
 * through the executor, success or failure. Each case below runs one call and counts.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ARGS = { amount: 5, note: 'café ☕' };
// biome-ignore lint/suspicious/noExplicitAny: the cases pass all kinds of args
const call = (turnId = 'turn-1', args: any = ARGS) => ({ toolName: 'charge', turnId, args });

function setup(
  options: Partial<IdempotencyOptions> = {},
  store: IdempotencyStore = createMemoryStore(),
) {
  const events: IdempotencyEvent[] = [];
  const idempotency = createIdempotency({ store, onEvent: (e) => events.push(e), ...options });
  /** Run one call; return its events and how it ended. */
  const one = async (run: () => Promise<unknown>) => {
    const before = events.length;
    let error: unknown;
    try {
      await run();
    } catch (e) {
      error = e;
    }
    return { events: events.slice(before), error };
  };
  return { idempotency, events, one, store };
}

/** An executor on the same store that emits nothing: a duplicate's holder in another process. */
const quiet = (store: IdempotencyStore) => createIdempotency({ store });

/** A store whose chosen operations throw, or return false / a corrupt record. */
function broken(
  inner: MemoryStore,
  faults: {
    claim?: 'throw';
    complete?: 'throw' | 'false';
    takeover?: 'throw';
    corrupt?: boolean;
    waitForChange?: 'throw';
  },
): IdempotencyStore {
  return {
    specificationVersion: 'v1',
    name: 'broken',
    capabilities: inner.capabilities,
    claim: async (input) => {
      if (faults.claim === 'throw') throw new Error('ECONNREFUSED');
      const result = await inner.claim(input);
      if (faults.corrupt === true && result.status === 'completed') {
        return { ...result, record: { ...result.record, outcome: '{not json' } };
      }
      return result;
    },
    complete: async (input) => {
      if (faults.complete === 'throw') throw new Error('ECONNRESET');
      if (faults.complete === 'false') return false;
      return inner.complete(input);
    },
    release: (key, token) => inner.release(key, token),
    renew: (key, token, lease) => inner.renew(key, token, lease),
    takeover: async (input) => {
      if (faults.takeover === 'throw') throw new Error('ETIMEDOUT');
      return inner.takeover(input);
    },
    get: (key) => inner.get(key),
    waitForChange: async (key, timeout) => {
      if (faults.waitForChange === 'throw') throw new Error('store bug');
      return inner.waitForChange(key, timeout);
    },
  };
}

/** Leave a stale attempt of `call()` in `store`. */
async function staleAttempt(store: MemoryStore, key: string, fingerprint: string) {
  await store.claim({ key, fingerprint, token: 'dead', leaseMs: 1, ttlMs: 60_000 });
  await sleep(5);
}

const cases: Array<[string, CallOutcomeCase]> = [];
interface CallOutcomeCase {
  outcome: IdempotencyEvent['outcome'];
  errorCode?: string;
  hasResult: boolean;
  run: () => Promise<{ events: IdempotencyEvent[]; error: unknown }>;
}
const add = (name: string, c: CallOutcomeCase) => cases.push([name, c]);

add('executed', {
  outcome: 'executed',
  hasResult: true,
  run: () => {
    const s = setup();
    return s.one(() => s.idempotency.run(call(), async () => ({ id: 1 })));
  },
});
add('executed after reconcile says it did not happen', {
  outcome: 'executed',
  hasResult: true,
  run: async () => {
    const store = createMemoryStore();
    const s = setup({}, store);
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(store, key, fingerprint);
    return s.one(() =>
      s.idempotency.run(call(), async () => 1, { reconcile: async () => ({ found: false }) }),
    );
  },
});
add('replayed', {
  outcome: 'replayed',
  hasResult: true,
  run: async () => {
    const s = setup();
    await s.idempotency.run(call(), async () => 'first');
    return s.one(() => s.idempotency.run(call(), async () => 'second'));
  },
});
add('replayed with onDrift replay', {
  outcome: 'replayed',
  hasResult: true,
  run: async () => {
    const s = setup({ onDrift: 'replay' });
    const policy = { businessKey: (a: { amount: number }) => `b-${a.amount}` };
    await s.idempotency.run(call('t', { amount: 1 }), async () => 'first', policy);
    return s.one(() =>
      s.idempotency.run(call('t', { amount: 1, extra: true }), async () => 'second', policy),
    );
  },
});
add('waited', {
  outcome: 'waited',
  hasResult: true,
  run: async () => {
    const s = setup();
    const holder = quiet(s.store).run(call(), async () => {
      await sleep(30);
      return 'done';
    });
    await sleep(5);
    const result = await s.one(() => s.idempotency.run(call(), async () => 'again'));
    await holder;
    return result;
  },
});
add('reconciled', {
  outcome: 'reconciled',
  hasResult: true,
  run: async () => {
    const store = createMemoryStore();
    const s = setup({}, store);
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(store, key, fingerprint);
    return s.one(() =>
      s.idempotency.run(call(), async () => ({ adopted: false }), {
        reconcile: async () => ({ found: true, value: { adopted: true } }),
      }),
    );
  },
});
add('drift', {
  outcome: 'drift',
  errorCode: 'drift',
  hasResult: false,
  run: async () => {
    const s = setup();
    const policy = { businessKey: () => 'same' };
    await s.idempotency.run(call('t', { a: 1 }), async () => 1, policy);
    return s.one(() => s.idempotency.run(call('t', { a: 2 }), async () => 2, policy));
  },
});
add('in-progress (reject)', {
  outcome: 'in-progress',
  errorCode: 'in_progress',
  hasResult: false,
  run: async () => {
    const s = setup({ onInProgress: 'reject' });
    const holder = quiet(s.store).run(call(), () => sleep(20).then(() => 1));
    await sleep(2);
    const result = await s.one(() => s.idempotency.run(call(), async () => 2));
    await holder;
    return result;
  },
});
add('in-progress (wait timed out)', {
  outcome: 'in-progress',
  errorCode: 'in_progress',
  hasResult: false,
  run: async () => {
    const s = setup({ waitTimeout: 10 });
    const holder = quiet(s.store).run(call(), () => sleep(40).then(() => 1));
    await sleep(2);
    const result = await s.one(() => s.idempotency.run(call(), async () => 2));
    await holder;
    return result;
  },
});
add('failed (tool throws)', {
  outcome: 'failed',
  errorCode: 'tool_error',
  hasResult: false,
  run: () => {
    const s = setup();
    return s.one(() =>
      s.idempotency.run(call(), async () => {
        throw new Error('boom');
      }),
    );
  },
});
add('failed (terminal error stored)', {
  outcome: 'failed',
  errorCode: 'tool_error',
  hasResult: false,
  run: () => {
    const s = setup({ isTerminalError: () => true });
    return s.one(() =>
      s.idempotency.run(call(), async () => {
        throw new Error('declined');
      }),
    );
  },
});
add('failed (terminal error replayed)', {
  outcome: 'failed',
  errorCode: 'replayed_failure',
  hasResult: true,
  run: async () => {
    const s = setup({ isTerminalError: () => true });
    await s.idempotency
      .run(call(), async () => {
        throw new Error('declined');
      })
      .catch(() => undefined);
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('failed (reconcile returned something that is not JSON)', {
  outcome: 'failed',
  errorCode: 'invalid_input',
  hasResult: false,
  run: async () => {
    const store = createMemoryStore();
    const s = setup({}, store);
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(store, key, fingerprint);
    return s.one(() =>
      s.idempotency.run(call(), async () => 1, {
        reconcile: async () => ({ found: true, value: 10n as unknown as number }),
      }),
    );
  },
});
add('failed (a store bug while waiting)', {
  outcome: 'failed',
  errorCode: 'internal_error',
  hasResult: false,
  run: async () => {
    const inner = createMemoryStore();
    const s = setup({}, broken(inner, { waitForChange: 'throw' }));
    const holder = quiet(s.store).run(call(), () => sleep(20).then(() => 1));
    await sleep(2);
    const result = await s.one(() => s.idempotency.run(call(), async () => 2));
    await holder;
    return result;
  },
});
add('persist-failed (result is not JSON)', {
  outcome: 'persist-failed',
  errorCode: 'persist_failed',
  hasResult: false,
  run: () => {
    const s = setup();
    return s.one(() => s.idempotency.run(call(), async () => 1n));
  },
});
add('persist-failed (complete throws)', {
  outcome: 'persist-failed',
  errorCode: 'persist_failed',
  hasResult: false,
  run: () => {
    // A failing complete is sent again until the settle bound (twice the lease, at least 30 s).
    const s = setup({}, broken(createMemoryStore(), { complete: 'throw' }));
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('persist-failed (lease lost)', {
  outcome: 'persist-failed',
  errorCode: 'persist_failed',
  hasResult: false,
  run: () => {
    const s = setup({}, broken(createMemoryStore(), { complete: 'false' }));
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('integrity-failed (the stored outcome is corrupt)', {
  outcome: 'integrity-failed',
  errorCode: 'record_integrity',
  hasResult: false,
  run: async () => {
    const inner = createMemoryStore();
    await createIdempotency({ store: inner }).run(call(), async () => 1);
    const s = setup({}, broken(inner, { corrupt: true }));
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('outcome-unknown', {
  outcome: 'outcome-unknown',
  errorCode: 'outcome_unknown',
  hasResult: false,
  run: async () => {
    const store = createMemoryStore();
    const s = setup({}, store);
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(store, key, fingerprint);
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('store-unavailable (claim)', {
  outcome: 'store-unavailable',
  errorCode: 'store_unavailable',
  hasResult: false,
  run: () => {
    const s = setup({}, broken(createMemoryStore(), { claim: 'throw' }));
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('unguarded (store down, fail-open: the tool ran)', {
  outcome: 'unguarded',
  hasResult: false,
  run: () => {
    const s = setup(
      { onStoreUnavailable: 'fail-open' },
      broken(createMemoryStore(), { claim: 'throw' }),
    );
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});
add('unguarded (store down, fail-open: the tool threw)', {
  outcome: 'unguarded',
  errorCode: 'tool_error',
  hasResult: false,
  run: () => {
    const s = setup(
      { onStoreUnavailable: 'fail-open' },
      broken(createMemoryStore(), { claim: 'throw' }),
    );
    return s.one(() =>
      s.idempotency.run(call(), async () => {
        throw new Error('vendor down too');
      }),
    );
  },
});
add('integrity-failed (an encrypted outcome copied under another key)', {
  outcome: 'integrity-failed',
  errorCode: 'record_integrity',
  hasResult: false,
  run: async () => {
    const store = createMemoryStore();
    const encryption = { keys: { k1: Buffer.alloc(32, 7) }, current: 'k1' };
    const s = setup({ encryption }, store);
    await s.idempotency.run(call('turn-a'), async () => 'secret');
    const source = await store.get(s.idempotency.keyOf(call('turn-a')).key);
    const { key, fingerprint } = s.idempotency.keyOf(call('turn-b'));
    await store.claim({ key, fingerprint, token: 't', leaseMs: 60_000, ttlMs: 60_000 });
    const outcome = source?.outcome ?? '';
    await store.complete({ key, token: 't', state: 'completed', outcome, ttlMs: 60_000 });
    return s.one(() => s.idempotency.run(call('turn-b'), async () => 1));
  },
});
add('store-unavailable (takeover)', {
  outcome: 'store-unavailable',
  errorCode: 'store_unavailable',
  hasResult: false,
  run: async () => {
    const inner = createMemoryStore();
    const s = setup(
      { onStale: 'reexecute', vendorDedupes: true },
      broken(inner, { takeover: 'throw' }),
    );
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(inner, key, fingerprint);
    return s.one(() => s.idempotency.run(call(), async () => 1));
  },
});

add('settled (an operator settles a stuck record; not a call)', {
  outcome: 'settled',
  hasResult: false,
  run: async () => {
    const inner = createMemoryStore();
    const s = setup({}, inner);
    const { key, fingerprint } = s.idempotency.keyOf(call());
    await staleAttempt(inner, key, fingerprint);
    const operator = { by: 'ops', reason: 'no charge at the vendor' };
    return s.one(() => s.idempotency.settle(key, { released: true }, operator));
  },
});

describe('every call emits exactly one event', () => {
  realTest.each(cases)(
    '%s',
    virtual(async (_name, c) => {
      const { events, error } = await c.run();
      expect(events).toHaveLength(1);
      const event = events[0]!;
      expect(event.outcome).toBe(c.outcome);
      expect(event.errorCode).toBe(c.errorCode);
      expect(error === undefined).toBe(c.errorCode === undefined);
      expect(event.durationMs).toBe(event.endedAt - event.startedAt);
      expect(event.argsFingerprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
      // A settlement has no args of its own (the record keeps only their fingerprint).
      if (c.outcome !== 'settled') expect(event.argsBytes).toBeGreaterThan(0);
      expect(event.resultBytes !== undefined).toBe(c.hasResult);
      expect('args' in event).toBe(false);
    }),
  );

  test('the cases cover every outcome', () => {
    expect(new Set(cases.map(([, c]) => c.outcome))).toEqual(new Set(CALL_OUTCOMES));
  });

  test('a call rejected before its key exists (bad input) emits none', async () => {
    const s = setup();
    const { events, error } = await s.one(() =>
      s.idempotency.run({ toolName: '', turnId: 't', args: {} }, async () => 1),
    );
    expect(error).toBeDefined();
    expect(events).toHaveLength(0);
  });

  test('1,000 concurrent duplicates: 1,000 events, one executed', async () => {
    const s = setup();
    await Promise.all(
      Array.from({ length: 1000 }, () => s.idempotency.run(call(), () => sleep(5).then(() => 1))),
    );
    expect(s.events).toHaveLength(1000);
    expect(s.events.filter((e) => e.outcome === 'executed')).toHaveLength(1);
    expect(s.events.filter(isReplay)).toHaveLength(999);
  });
});

describe('event fields', () => {
  test('fingerprint and sizes, never the raw args or result', async () => {
    const s = setup();
    const result = { id: 'ch_1', secret: 'sk_live_xyz' };
    await s.idempotency.run(call(), async () => result);
    await s.idempotency.run(call(), async () => result);
    const [executed, replayed] = s.events;
    const { fingerprint } = s.idempotency.keyOf(call());
    const stored = JSON.stringify({ v: result });
    for (const event of [executed!, replayed!]) {
      expect(event.argsFingerprint).toBe(fingerprint);
      expect(event.argsBytes).toBe(Buffer.byteLength(canonicalize(ARGS)));
      expect(event.resultBytes).toBe(Buffer.byteLength(stored));
      expect(JSON.stringify(event)).not.toMatch(/sk_live|café/);
    }
  });

  test('exposeArgs puts the raw args on the event (debugging only)', async () => {
    const s = setup({ exposeArgs: true });
    await s.idempotency.run(call(), async () => 1);
    expect(s.events[0]?.args).toEqual(ARGS);
  });
});
