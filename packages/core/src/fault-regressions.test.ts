/**
 * Issue 26: duplicates, lost results and stuck keys found on the defaults under faults the
 * earlier tests never drew. Each case is the fault as it was seen, the fix's assertion, and
 * what the code did before ("before the fix"). Virtual time where only the memory store is
 * involved (see test-utils/virtual-time.ts); real sockets where the case is about requests.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { InvalidInputError, OutcomeUnknownError, StoreUnavailableError } from './errors/index.js';
import { createIdempotency } from './executor.js';
import { createMemoryStore, type MemoryStore } from './store/memory-store.js';
import type { IdempotencyStore } from './store/store.js';
import { virtual } from './test-utils/virtual-time.js';

const HOUR = 3_600_000;
const call = { toolName: 'charge', turnId: 'turn-1', args: { amount: 5 } };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A store passing every operation to `inner`, with some replaced. */
function over(inner: MemoryStore, replace: Partial<IdempotencyStore>): IdempotencyStore {
  return {
    specificationVersion: 'v1',
    name: 'probe',
    capabilities: inner.capabilities,
    claim: (input) => inner.claim(input),
    complete: (input) => inner.complete(input),
    release: (key, token) => inner.release(key, token),
    renew: (key, token, leaseMs) => inner.renew(key, token, leaseMs),
    takeover: (input) => inner.takeover(input),
    get: (key) => inner.get(key),
    ...replace,
  };
}

const down = () => Promise.reject(new StoreUnavailableError({ message: 'ECONNREFUSED' }));

describe('1. the default policy and a plain fetch: a request that left keeps the attempt', () => {
  /** A vendor that charges on receipt and answers after `delayMs` (the client gives up first). */
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });
  async function slowVendor(delayMs: number) {
    const charges: string[] = [];
    /** Called with each request the vendor received (before it answers). */
    const received: Array<() => void> = [];
    server = createServer((req, res) => {
      charges.push(`${req.method} ${req.url}`);
      for (const notify of received.splice(0)) notify();
      setTimeout(() => res.end('{"id":"ch_1"}'), delayMs).unref();
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return { charges, received, url: `http://127.0.0.1:${port}` };
  }

  test('fetch times out after the vendor got it: kept; the retry is outcome-unknown, one charge (before the fix: released, 2 charges)', async () => {
    const vendor = await slowVendor(60_000);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const charge = async () => {
      // The client gives up once the vendor has the request (as a timeout would, on any machine).
      const gaveUp = new AbortController();
      vendor.received.push(() => gaveUp.abort(new DOMException('timed out', 'TimeoutError')));
      const res = await fetch(`${vendor.url}/charges`, {
        method: 'POST',
        body: '{"amount":5}',
        signal: gaveUp.signal,
      });
      return res.json();
    };
    await expect(idempotency.run(call, charge)).rejects.toThrow(/abort|timeout|timed out/i);
    await expect(idempotency.run(call, charge)).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    expect(vendor.charges).toEqual(['POST /charges']);
  });

  test('node:http the same: kept once the request had a connected socket', async () => {
    const vendor = await slowVendor(60_000);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const charge = () =>
      new Promise((resolve, reject) => {
        const req = httpRequest(`${vendor.url}/charges`, { method: 'POST' });
        // The client gives up once the vendor has the request (as a socket timeout would).
        vendor.received.push(() => req.destroy(new Error('socket timeout')));
        req.on('error', reject);
        req.on('response', resolve);
        req.end('{"amount":5}');
      });
    await expect(idempotency.run(call, charge)).rejects.toThrow(/socket timeout/);
    await expect(idempotency.run(call, charge)).rejects.toSatisfy(OutcomeUnknownError.isInstance);
    expect(vendor.charges).toEqual(['POST /charges']);
  });

  test('nothing left (a refused connection, a GET), or the vendor dedupes: released, the retry runs', async () => {
    const vendor = await slowVendor(0);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let attempt = 0;
    const refusedThenOk = async () => {
      if (++attempt === 1) {
        await fetch('http://127.0.0.1:1/charges', { method: 'POST', body: '{}' });
      }
      return 'ok';
    };
    await expect(idempotency.run(call, refusedThenOk)).rejects.toThrow();
    expect((await idempotency.run(call, refusedThenOk)).value).toBe('ok');

    const readThenFail = async () => {
      await (await fetch(`${vendor.url}/balance`)).text();
      throw new Error('parse error');
    };
    const read = { ...call, turnId: 'turn-2' };
    await expect(idempotency.run(read, readThenFail)).rejects.toThrow('parse error');
    await expect(idempotency.run(read, readThenFail)).rejects.toThrow('parse error');

    const dedupes = { ...call, turnId: 'turn-3' };
    const postThenFail = async () => {
      await (await fetch(`${vendor.url}/charges`, { method: 'POST', body: '{}' })).text();
      throw new Error('reply unreadable');
    };
    for (let i = 0; i < 2; i++) {
      await expect(idempotency.run(dedupes, postThenFail, { vendorDedupes: true })).rejects.toThrow(
        'reply unreadable',
      );
    }
    expect(vendor.charges).toEqual([
      'GET /balance',
      'GET /balance',
      'POST /charges',
      'POST /charges',
    ]);
  });

  test("the executor's own store traffic inside a tool (a vendorCall's claim over HTTP) is not the tool's request", async () => {
    const vendor = await slowVendor(0);
    const inner = createMemoryStore();
    // A store over HTTP (DynamoDB, a REST Redis): every claim is a POST.
    const httpStore = over(inner, {
      claim: async (input) => {
        await (await fetch(`${vendor.url}/store`, { method: 'POST', body: '{}' })).text();
        return inner.claim(input);
      },
    });
    const idempotency = createIdempotency({ store: httpStore });
    let runs = 0;
    const tool = async (_: unknown, ctx: Parameters<Parameters<typeof idempotency.run>[1]>[1]) => {
      runs++;
      await idempotency.vendorCall(ctx, 'bank.transfer', async () => 'tr_1');
      if (runs === 1) throw new Error('crm timeout'); // after the ledgered transfer
      return 'done';
    };
    await expect(idempotency.run(call, tool)).rejects.toThrow('crm timeout');
    // Released (the effect is in the ledger): the retry runs, its transfer replays from the ledger.
    expect((await idempotency.run(call, tool)).value).toBe('done');
    expect(runs).toBe(2);
  });
});

describe('2. reconcile while a request is in flight: the settle window', () => {
  test(
    'a partitioned holder sends just before it gives up; the vendor commits 300 ms after receipt; the taker sees it (before the fix: 9/20 charged twice)',
    virtual(async () => {
      const inner = createMemoryStore();
      const LEASE = 1_000;
      const committed: string[] = [];
      // The holder is cut off from the store (renewals fail), not frozen: it keeps running.
      const holder = createIdempotency({
        store: over(inner, { renew: down, complete: down, release: down }),
        lease: LEASE,
      });
      holder
        .run(call, async (_args, ctx) => {
          await sleep(LEASE - LEASE / 10 - 5); // just inside its lease (it gives up a tenth early)
          if (!ctx.stillOwned()) return 'gave up';
          setTimeout(() => committed.push(ctx.key), 300); // the vendor commits after receipt
          await sleep(60_000);
          return 'charged';
        })
        .catch(() => {});
      await sleep(LEASE + 1); // the store's lease ran out: the record is stale
      const taker = createIdempotency({ store: inner, lease: LEASE });
      let ran = 0;
      const result = await taker.run(
        call,
        async () => {
          ran++;
          return 'charged again';
        },
        {
          reconcile: async ({ key }) =>
            committed.includes(key) ? { found: true, value: 'charged' } : { found: false },
        },
      );
      expect(result).toMatchObject({ outcome: 'reconciled', value: 'charged' });
      expect(ran).toBe(0);
    }),
  );

  test(
    'settleWindow longer than the lease: reconcile waits for it',
    virtual(async () => {
      const inner = createMemoryStore();
      const { key, fingerprint } = createIdempotency({ store: inner }).keyOf(call);
      await inner.claim({ key, fingerprint, token: 'dead', leaseMs: 1_000, ttlMs: HOUR });
      const started = Date.now();
      const asked: number[] = [];
      await createIdempotency({ store: inner, lease: 1_000, settleWindow: 45_000 }).run(
        call,
        async () => 'ran',
        {
          reconcile: async () => {
            asked.push(Date.now() - started);
            return { found: false };
          },
        },
      );
      expect(asked).toHaveLength(1);
      expect(asked[0]).toBeGreaterThanOrEqual(45_000);
    }),
  );
});

describe('3. the store clock steps forward: a live holder is never taken over', () => {
  test(
    '+20 s on the store clock while a renewing holder runs: the retry waits and replays, one effect (before the fix: 2/10 duplicates)',
    virtual(async () => {
      const clock = { offset: 0 };
      const store = createMemoryStore({ now: () => Date.now() + clock.offset });
      const LEASE = 10_000;
      let effects = 0;
      const holder = createIdempotency({ store, lease: LEASE });
      const first = holder.run(call, async () => {
        await sleep(3 * LEASE);
        effects++;
        return 'ch_1';
      });
      await sleep(LEASE / 3 + 100); // just after a renewal
      clock.offset += 20_000; // the store's wall clock steps forward
      const retry = createIdempotency({ store, lease: LEASE, waitTimeout: 120_000 });
      const second = await retry.run(
        call,
        async () => {
          effects++;
          return 'ch_2';
        },
        { reconcile: async () => ({ found: false }) },
      );
      expect(await first).toMatchObject({ value: 'ch_1', replayed: false });
      expect(second).toMatchObject({ value: 'ch_1', replayed: true });
      expect(effects).toBe(1);
    }),
  );
});

describe('4. a claim whose reply was lost, then an outage: never a stuck key', () => {
  test(
    'the retry after the outage runs the tool (before the fix: outcome_unknown for the whole ttl)',
    virtual(async () => {
      const inner = createMemoryStore();
      let outage = false;
      let lostReplies = 1;
      const store = over(inner, {
        claim: async (input) => {
          if (outage) return down();
          const answer = await inner.claim(input);
          if (lostReplies-- > 0) {
            outage = true; // the claim landed, its reply is lost, and the store goes down
            setTimeout(() => {
              outage = false;
            }, 2_000);
            return down();
          }
          return answer;
        },
        release: (key, token) => (outage ? down() : inner.release(key, token)),
      });
      const idempotency = createIdempotency({ store });
      let runs = 0;
      const tool = async () => ++runs;
      await expect(idempotency.run(call, tool)).rejects.toSatisfy(StoreUnavailableError.isInstance);
      await sleep(2_500); // the outage is over
      expect((await idempotency.run(call, tool)).value).toBe(1);
      expect(runs).toBe(1);
    }),
  );

  test(
    'another process meets the record after the background release: it runs the tool',
    virtual(async () => {
      const inner = createMemoryStore();
      let outage = false;
      let lostReplies = 1;
      const store = over(inner, {
        claim: async (input) => {
          if (outage) return down();
          const answer = await inner.claim(input);
          if (lostReplies-- > 0) {
            outage = true;
            setTimeout(() => {
              outage = false;
            }, 2_000);
            return down();
          }
          return answer;
        },
        release: (key, token) => (outage ? down() : inner.release(key, token)),
      });
      await expect(createIdempotency({ store }).run(call, async () => 1)).rejects.toSatisfy(
        StoreUnavailableError.isInstance,
      );
      await sleep(10_000); // the first process released its orphaned claim once the store was back
      const other = createIdempotency({ store: inner });
      expect(await other.run(call, async () => 'ran')).toMatchObject({ value: 'ran' });
    }),
  );
});

describe('5. complete is sent again past the holder lease, until fenced out or the bound', () => {
  test(
    'a 2 s lock with a 1.5 s lease: the result is kept (before the fix: lost)',
    virtual(async () => {
      const inner = createMemoryStore();
      let locked = false;
      const store = over(inner, {
        complete: (input) => (locked ? down() : inner.complete(input)),
      });
      const idempotency = createIdempotency({ store, lease: 1_500 });
      const result = await idempotency.run(call, async () => {
        locked = true;
        setTimeout(() => {
          locked = false;
        }, 2_000);
        return 'ch_1';
      });
      expect(result).toMatchObject({ value: 'ch_1', outcome: 'executed' });
      expect((await idempotency.run(call, async () => 'ch_2')).value).toBe('ch_1');
    }),
  );
});

describe('8. smaller', () => {
  test('ctx.signal first read after a synchronous stall past the lease is aborted', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore(), lease: 1_000 });
    const outcome = await idempotency
      .run(call, async (_args, ctx) => {
        const until = performance.now() + 1_100;
        while (performance.now() < until) {
          // a synchronous stall: no timer can fire
        }
        return ctx.signal.aborted;
      })
      .catch((e: unknown) => e);
    // The attempt lost its lease; whatever it returned, its signal said so when first read.
    expect(
      (outcome as { value?: unknown }).value === true ||
        (outcome as { reason?: string }).reason === 'lease_lost',
    ).toBe(true);
  });

  test(
    'waitTimeout is on the monotonic clock: a wall clock stepped back an hour does not stretch it',
    virtual(async () => {
      const store = createMemoryStore();
      const idempotency = createIdempotency({ store, waitTimeout: 500 });
      const holder = idempotency.run(call, () => sleep(60_000).then(() => 1));
      const started = performance.now();
      const waiting = idempotency.run(call, async () => 2).catch((e: unknown) => e);
      await sleep(100);
      vi.setSystemTime(Date.now() - HOUR);
      const error = await waiting;
      expect(error).toMatchObject({ code: 'in_progress' });
      expect(performance.now() - started).toBeLessThan(1_500);
      await holder;
    }),
  );

  test('a lease in seconds by mistake (lease: 30) is refused, naming the unit', () => {
    expect(() => createIdempotency({ store: createMemoryStore(), lease: 30 })).toThrow(
      expect.objectContaining({ field: 'lease', message: expect.stringMatching(/30000/) }),
    );
    const idempotency = createIdempotency({ store: createMemoryStore() });
    expect(() => idempotency.checkPolicy({ lease: 999 })).toThrow(InvalidInputError);
  });

  test('a top-level -0 result: the first caller and every replay get 0', async () => {
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const first = await idempotency.run(call, async () => -0);
    const replay = await idempotency.run(call, async () => -0);
    expect(Object.is(first.value, 0)).toBe(true);
    expect(Object.is(replay.value, 0)).toBe(true);
  });
});
