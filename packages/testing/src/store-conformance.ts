import { createHash, randomUUID } from 'node:crypto';
import {
  type ClaimInput,
  type ClaimResult,
  createIdempotency,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  type ListedRecord,
  type ListFilter,
  RecordIntegrityError,
  type RecordPage,
  StoreUnavailableError,
} from '@idempotent-tools/core';
import { createTestClock, sleep, type TestClock } from './clock.js';
import { defineSecurityTests } from './conformance-security.js';
import type { ExpectLike } from './expect.js';
import { inWindow, type Window } from './timing.js';
import { uniqueKey } from './unique-key.js';

/** The matchers the suite uses. Vitest's and Jest's `expect(...)` results both fit. */
export interface StoreConformanceOptions<S extends IdempotencyStore = IdempotencyStore> {
  /** Label of the outer `describe`, e.g. `'redis store'`. */
  name: string;
  /** The runner's `describe` (Vitest, Jest, Mocha-style). */
  describe: (name: string, fn: () => void) => void;
  /** The runner's `test`/`it`; the suite passes a timeout suited to the clock mode. */
  test: (name: string, fn: () => Promise<void>, timeoutMs?: number) => void;
  /** The runner's `expect`. */
  expect: ExpectLike;
  /**
   * Build a fresh store (fresh keyspace) for one test. `clock` is the one that test controls: a
   * store with an injected clock must read it (`createMemoryStore({ now: clock.now })`).
   */
  createStore: (ctx: { clock: TestClock }) => S | Promise<S>;
  /**
   * Clean up after one test: close the store and drop its keyspace, never the user's client
   * unless the factory made it. It must tolerate a store the suite already closed (the
   * `waitForChange` after `close` test closes it).
   * @default store.close?.()
   */
  destroyStore?: (store: S) => void | Promise<void>;
  /**
   * `virtual`: the store honours the injected clock and the suite advances it instantly.
   * `real`: the store uses real time (Redis `TIME`, PostgreSQL `now()`) and the suite sleeps.
   */
  clock: 'virtual' | 'real';
  /**
   * Look into the backing engine to prove expired records are really removed by `purgeExpired`.
   * `count` returns how many records the engine holds for this store (its keyspace), expired
   * ones not yet removed included.
   */
  raw?: { count(store: S): Promise<number> };
  /**
   * Write under `key`, with the engine's own client, a record the store cannot read (garbage, a
   * row missing its outcome: what a stray writer or a bad migration leaves). The suite then
   * checks that reading it fails with `RecordIntegrityError` (reason `corrupt`), never with
   * `StoreUnavailableError`, so `onStoreUnavailable: 'fail-open'` never runs the tool over it.
   * Leave it out for a store nothing but itself can write to (the memory store).
   */
  corruptRecord?: (store: S, key: string) => Promise<void>;
  /**
   * Multiplier for every duration (leases, TTLs, sleeps) in `real` mode. Raise it for a slow or
   * remote engine.
   * @default 1
   */
  timeScale?: number;
  /**
   * Number of concurrent calls in the race tests.
   * @default 200
   */
  concurrency?: number;
  /**
   * Number of concurrent executor calls of one tool call in the single-execution test.
   * @default 1000
   */
  executorConcurrency?: number;
}

interface TestContext<S> {
  store: S;
  clock: TestClock;
}

/** The durations of one attempt of a timed clause (see `defineTimed`). */
interface Timing {
  /** A duration of this attempt: the suite's `ms(base)` times the attempt's factor. */
  ms(base: number): number;
  /**
   * Call before asserting what holds only until `duration` ms after `since`. In `real` mode it
   * throws (and the attempt is repeated with longer durations) when that time has passed.
   */
  within(since: number, duration: number): void;
}

/** A window counts as kept only when this many ms of it are left (store clocks round to ms). */
const WINDOW_MARGIN = 3;

/** A lease and a TTL long enough that no test of behaviour unrelated to time sees them run out. */
const LONG_LEASE = 60_000;
const LONG_TTL = 120_000;
/** In `real` mode store timestamps are compared with the local clock within this skew. */
const CLOCK_SKEW = 60_000;

const FP_A = fingerprint('a');
const FP_B = fingerprint('b');

/**
 * Register the store conformance suite with the caller's test runner. Every test builds its own
 * store with `createStore` and uses keys no other test uses, so a real engine shared between
 * tests (and test files) is fine.
 *
 * ```ts
 * import { describe, expect, test } from 'vitest';
 * runStoreConformance({ name: 'my store', describe, test, expect, clock: 'real',
 *   createStore: () => createMyStore(client) });
 * ```
 */
export function runStoreConformance<S extends IdempotencyStore>(
  options: StoreConformanceOptions<S>,
): void {
  const { expect, describe } = options;
  const mode = options.clock;
  const scale = options.timeScale ?? 1;
  const concurrency = options.concurrency ?? 200;
  const executorConcurrency = options.executorConcurrency ?? 1000;
  if (!(Number.isFinite(scale) && scale > 0)) {
    throw new RangeError(`timeScale must be a positive number, got ${scale}`);
  }
  if (!Number.isInteger(concurrency) || concurrency < 2) {
    throw new RangeError(`concurrency must be an integer >= 2, got ${concurrency}`);
  }

  /** A duration of the suite, scaled in `real` mode. */
  const ms = (base: number): number =>
    mode === 'real' ? Math.max(1, Math.round(base * scale)) : base;
  /** Tolerance on differences of two store timestamps taken by one operation. */
  const tolerance = mode === 'real' ? ms(50) : 0;
  const timeoutMs = mode === 'real' ? Math.max(15_000, ms(15_000)) : 15_000;
  const LEASE = ms(100);
  const TTL = ms(300);

  const define = (name: string, body: (ctx: TestContext<S>) => Promise<void>): void => {
    options.test(
      name,
      async () => {
        const clock = createTestClock({ mode });
        const store = await options.createStore({ clock });
        try {
          await body({ store, clock });
        } finally {
          if (options.destroyStore !== undefined) await options.destroyStore(store);
          else await store.close?.();
        }
      },
      timeoutMs,
    );
  };

  /**
   * A clause that needs a window of real time: in `real` mode the body runs with every duration
   * it takes from `t.ms` scaled by the attempt's factor (`inWindow`: 1, 4, 16, 64). Before asserting what
   * holds only inside a window (a lease still live, a record not yet expired), the body calls
   * `t.within(since, duration)`: when more than `duration` ms have passed since `since` (a local
   * time read before the operation that opened the window), a loaded machine slept past the
   * window, the attempt proves nothing and is run again with fresh keys and longer durations.
   * What holds once time has passed (a lease ran out, a record expired) is asserted on every
   * attempt. The clause fails only when every attempt missed its window.
   */
  const defineTimed = (
    name: string,
    body: (ctx: TestContext<S> & { t: Timing }) => Promise<void>,
  ): void => {
    options.test(
      name,
      async () => {
        const clock = createTestClock({ mode });
        const store = await options.createStore({ clock });
        try {
          const attempt = (window: Window) =>
            body({
              store,
              clock,
              t: {
                ms: (base) => ms(base) * window.factor,
                within: (since, duration) => {
                  const elapsed = clock.now() - since;
                  window.within(
                    mode === 'virtual' || elapsed < duration - WINDOW_MARGIN,
                    `${elapsed} ms had passed of a ${duration} ms window`,
                  );
                },
              },
            });
          if (mode === 'virtual') await attempt({ factor: 1, ms: (b) => b, within: () => {} });
          else await inWindow(attempt, `conformance: ${options.name}`);
        } finally {
          if (options.destroyStore !== undefined) await options.destroyStore(store);
          else await store.close?.();
        }
      },
      mode === 'real' ? timeoutMs * 4 : timeoutMs,
    );
  };

  // ---- helpers (they assert through the caller's `expect`) ----

  const key = (label = ''): string => uniqueKey(`conformance${label === '' ? '' : `-${label}`}`);

  const claimInput = (k: string, overrides: Partial<ClaimInput> = {}): ClaimInput => ({
    key: k,
    fingerprint: FP_A,
    token: randomUUID(),
    leaseMs: LONG_LEASE,
    ttlMs: LONG_TTL,
    ...overrides,
  });

  const expectStatus = <T extends ClaimResult['status']>(
    result: ClaimResult,
    status: T,
  ): Extract<ClaimResult, { status: T }> => {
    expect(result.status).toBe(status);
    if (result.status !== status) throw new Error(`expected claim ${status}, got ${result.status}`);
    return result as Extract<ClaimResult, { status: T }>;
  };

  /** Claim `input` and require `acquired`; returns the record. */
  const acquire = async (store: IdempotencyStore, input: ClaimInput) => {
    const result = expectStatus(await store.claim(input), 'acquired');
    expect(result.token).toBe(input.token);
    return result.record;
  };

  const mustGet = async (store: IdempotencyStore, k: string): Promise<IdempotencyRecord> => {
    const record = await store.get(k);
    expect(record).toBeDefined();
    if (record === undefined) throw new Error(`expected a live record at ${k}`);
    return record;
  };

  const complete = async (
    store: IdempotencyStore,
    k: string,
    token: string,
    state: 'completed' | 'failed' = 'completed',
    outcome = '{"ok":true}',
    ttlMs = LONG_TTL,
  ): Promise<void> => {
    expect(await store.complete({ key: k, token, state, outcome, ttlMs })).toBe(true);
  };

  const near = (actual: number, expected: number, within: number): void => {
    expect(actual).toBeGreaterThanOrEqual(expected - within);
    expect(actual).toBeLessThanOrEqual(expected + within);
  };

  /** A store timestamp read between local times `before` and `after`. */
  const expectStoreTime = (actual: number, before: number, after: number): void => {
    const skew = mode === 'real' ? CLOCK_SKEW : 0;
    expect(actual).toBeGreaterThanOrEqual(before - skew);
    expect(actual).toBeLessThanOrEqual(after + skew);
  };

  const count = (results: readonly (boolean | ClaimResult)[], what: boolean | string): number =>
    results.filter((r) => (typeof r === 'boolean' ? r === what : r.status === what)).length;

  describe(options.name, () => {
    describe('store identity', () => {
      define(
        'declares specificationVersion v1, a name and boolean capabilities',
        async ({ store }) => {
          expect(store.specificationVersion).toBe('v1');
          expect(typeof store.name).toBe('string');
          expect(store.name.length).toBeGreaterThan(0);
          expect(typeof store.capabilities).toBe('object');
          expect(typeof store.capabilities.notifiesChanges).toBe('boolean');
          expect(typeof store.capabilities.durable).toBe('boolean');
        },
      );
    });

    describe('claim', () => {
      define(
        'claim on an empty key acquires it and stores an in_progress record',
        async ({ store, clock }) => {
          const k = key();
          const meta = { toolName: 'create_ticket', scope: 'tenant-ü 1', turnId: 'turn:1' };
          const input = claimInput(k, { leaseMs: 30_000, ttlMs: 90_000, meta });
          const before = clock.now();
          const result = expectStatus(await store.claim(input), 'acquired');
          const after = clock.now();
          expect(result.token).toBe(input.token);

          const record = await mustGet(store, k);
          expect({ ...record, leaseExpiresAt: 0, expiresAt: 0, createdAt: 0 }).toEqual({
            key: k,
            state: 'in_progress',
            fingerprint: FP_A,
            token: input.token,
            leaseExpiresAt: 0,
            expiresAt: 0,
            createdAt: 0,
            meta,
          });
          expect(record.outcome).toBeUndefined();
          expect(record.completedAt).toBeUndefined();
          expectStoreTime(record.createdAt, before, after);
          near(record.leaseExpiresAt - record.createdAt, 30_000, tolerance);
          near(record.expiresAt - record.createdAt, 90_000, tolerance);
          expect(record.expiresAt).toBeGreaterThanOrEqual(record.leaseExpiresAt);
          expect(result.record).toEqual(record);
        },
      );

      define(
        'claim with the same fingerprint while the lease is live reports in_progress',
        async ({ store }) => {
          const k = key();
          const meta = { toolName: 'deploy' };
          const owner = claimInput(k, { meta });
          await acquire(store, owner);
          const before = await mustGet(store, k);

          const second = claimInput(k);
          const result = expectStatus(await store.claim(second), 'in_progress');
          expect(result.record.token).toBe(owner.token);
          expect(result.record.state).toBe('in_progress');
          expect(result.record.fingerprint).toBe(FP_A);
          expect(result.record.meta).toEqual(meta);
          expect(await mustGet(store, k)).toEqual(before);
        },
      );

      define(
        'claim after complete reports completed with the outcome byte-exact',
        async ({ store }) => {
          const base = key();
          for (const [i, outcome] of AWKWARD_OUTCOMES.entries()) {
            const k = `${base}-${i}`;
            const owner = claimInput(k);
            await acquire(store, owner);
            await complete(store, k, owner.token, 'completed', outcome);

            const result = expectStatus(await store.claim(claimInput(k)), 'completed');
            expect(result.record.state).toBe('completed');
            expect(result.record.outcome?.length).toBe(outcome.length);
            expect(result.record.outcome).toBe(outcome);
            expect(result.record.token).toBe(owner.token);
            expect(result.record.completedAt).toBeDefined();
            expect((await mustGet(store, k)).outcome).toBe(outcome);
          }
        },
      );

      define(
        'a failed outcome is replayed as status completed with state failed',
        async ({ store }) => {
          const k = key();
          const owner = claimInput(k);
          await acquire(store, owner);
          const outcome =
            '{"error":{"name":"CardDeclined","message":"Karte abgelehnt – “nein”\\n"}}';
          await complete(store, k, owner.token, 'failed', outcome);

          const result = expectStatus(await store.claim(claimInput(k)), 'completed');
          expect(result.record.state).toBe('failed');
          expect(result.record.outcome).toBe(outcome);
          expect(result.record.completedAt).toBeDefined();
          expect((await mustGet(store, k)).state).toBe('failed');
        },
      );

      define(
        'claim with another fingerprint reports drift in every state',
        async ({ store, clock }) => {
          const base = key();
          const inProgress = claimInput(`${base}-in-progress`);
          const completed = claimInput(`${base}-completed`);
          const failed = claimInput(`${base}-failed`);
          const stale = claimInput(`${base}-stale`, { leaseMs: LEASE });
          for (const input of [inProgress, completed, failed, stale]) await acquire(store, input);
          await complete(store, completed.key, completed.token, 'completed', '"done"');
          await complete(store, failed.key, failed.token, 'failed', '"boom"');

          const drift = async (k: string, state: string, outcome?: string) => {
            const before = await mustGet(store, k);
            const result = expectStatus(
              await store.claim(claimInput(k, { fingerprint: FP_B })),
              'drift',
            );
            expect(result.record.fingerprint).toBe(FP_A);
            expect(result.record.state).toBe(state);
            expect(result.record.outcome).toBe(outcome);
            expect(await mustGet(store, k)).toEqual(before);
          };
          await drift(inProgress.key, 'in_progress');
          await drift(completed.key, 'completed', '"done"');
          await drift(failed.key, 'failed', '"boom"');

          await clock.advance(ms(150));
          expectStatus(await store.claim(claimInput(stale.key)), 'stale');
          await drift(stale.key, 'in_progress');
          await drift(completed.key, 'completed', '"done"');
        },
      );
    });

    describe('lease and takeover', () => {
      defineTimed(
        'a claim whose lease ran out reports stale with the old token',
        async ({ store, clock, t }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: t.ms(100) });
          const claimedAt = clock.now();
          await acquire(store, owner);
          await clock.advance(t.ms(40));
          const inside = await store.claim(claimInput(k));
          t.within(claimedAt, t.ms(100));
          expectStatus(inside, 'in_progress');

          await clock.advance(t.ms(110));
          const result = expectStatus(await store.claim(claimInput(k)), 'stale');
          expect(result.record.token).toBe(owner.token);
          expect(result.record.state).toBe('in_progress');
          // Reporting stale takes nothing over: a second claim still sees the old owner.
          const again = expectStatus(await store.claim(claimInput(k)), 'stale');
          expect(again.record.token).toBe(owner.token);
          expect((await mustGet(store, k)).token).toBe(owner.token);
        },
      );

      define(
        'takeover with the stale token moves ownership, with a fresh lease and the same createdAt',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          const original = await acquire(store, owner);
          await clock.advance(ms(150));
          expectStatus(await store.claim(claimInput(k)), 'stale');

          const token = randomUUID();
          const before = clock.now();
          expect(
            await store.takeover({
              key: k,
              staleToken: owner.token,
              token,
              leaseMs: 30_000,
              ttlMs: 60_000,
            }),
          ).toBe(true);
          const after = clock.now();

          const record = await mustGet(store, k);
          expect(record.token).toBe(token);
          expect(record.state).toBe('in_progress');
          expect(record.fingerprint).toBe(FP_A);
          expect(record.createdAt).toBe(original.createdAt);
          expect(record.leaseExpiresAt).toBeGreaterThanOrEqual(original.leaseExpiresAt + 30_000);
          expectStoreTime(record.leaseExpiresAt, before + 30_000, after + 30_000);
          expect(record.expiresAt).toBeGreaterThanOrEqual(record.leaseExpiresAt);
          near(record.expiresAt - record.leaseExpiresAt, 30_000, tolerance);

          const result = expectStatus(await store.claim(claimInput(k)), 'in_progress');
          expect(result.record.token).toBe(token);
          await complete(store, k, token);
          expectStatus(await store.claim(claimInput(k)), 'completed');
        },
      );

      define(
        'takeover with a wrong stale token returns false and changes nothing',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          const before = await mustGet(store, k);
          for (const staleToken of [randomUUID(), '', `${owner.token} `]) {
            expect(
              await store.takeover({
                key: k,
                staleToken,
                token: randomUUID(),
                leaseMs: LEASE,
                ttlMs: TTL,
              }),
            ).toBe(false);
          }
          expect(await mustGet(store, k)).toEqual(before);
          expectStatus(await store.claim(claimInput(k)), 'stale');
        },
      );

      define(
        'takeover while the lease is live returns false and changes nothing',
        async ({ store }) => {
          const k = key();
          const owner = claimInput(k);
          await acquire(store, owner);
          const before = await mustGet(store, k);
          expect(
            await store.takeover({
              key: k,
              staleToken: owner.token,
              token: randomUUID(),
              leaseMs: LONG_LEASE,
              ttlMs: LONG_TTL,
            }),
          ).toBe(false);
          expect(await mustGet(store, k)).toEqual(before);
        },
      );

      define(
        'takeover of a completed or failed record returns false and changes nothing',
        async ({ store, clock }) => {
          const base = key();
          const owners = (['completed', 'failed'] as const).map((state) => ({
            state,
            input: claimInput(`${base}-${state}`, { leaseMs: LEASE }),
          }));
          for (const { state, input } of owners) {
            await acquire(store, input);
            await complete(store, input.key, input.token, state, `"${state}"`);
          }
          await clock.advance(ms(150));
          for (const { state, input } of owners) {
            const before = await mustGet(store, input.key);
            expect(
              await store.takeover({
                key: input.key,
                staleToken: input.token,
                token: randomUUID(),
                leaseMs: LEASE,
                ttlMs: TTL,
              }),
            ).toBe(false);
            const record = await mustGet(store, input.key);
            expect(record).toEqual(before);
            expect(record.state).toBe(state);
          }
        },
      );

      define('takeover of a missing key returns false and creates nothing', async ({ store }) => {
        const k = key();
        expect(
          await store.takeover({
            key: k,
            staleToken: randomUUID(),
            token: randomUUID(),
            leaseMs: LEASE,
            ttlMs: TTL,
          }),
        ).toBe(false);
        expect(await store.get(k)).toBeUndefined();
      });

      define(
        'concurrent takeovers of one stale record: exactly one wins',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          const tokens = Array.from({ length: Math.min(concurrency, 20) }, () => randomUUID());
          const results = await Promise.all(
            tokens.map((token) =>
              store.takeover({
                key: k,
                staleToken: owner.token,
                token,
                leaseMs: LONG_LEASE,
                ttlMs: LONG_TTL,
              }),
            ),
          );
          expect(count(results, true)).toBe(1);
          const winner = tokens[results.indexOf(true)];
          expect((await mustGet(store, k)).token).toBe(winner);
        },
      );
    });

    describe('fencing', () => {
      define(
        'complete, release and renew with a wrong token return false and change nothing',
        async ({ store }) => {
          const k = key();
          const owner = claimInput(k);
          await acquire(store, owner);
          const other = claimInput(key('other'));
          await acquire(store, other);
          const before = await mustGet(store, k);

          // randomUUID() is lower case, so the upper-cased owner token differs only in case.
          for (const token of [randomUUID(), other.token, '', owner.token.toUpperCase()]) {
            expect(
              await store.complete({
                key: k,
                token,
                state: 'completed',
                outcome: '"x"',
                ttlMs: LONG_TTL,
              }),
            ).toBe(false);
            expect(await store.release(k, token)).toBe(false);
            expect(await store.renew(k, token, LONG_LEASE * 2)).toBe(false);
          }
          expect(await mustGet(store, k)).toEqual(before);
        },
      );

      define(
        'after a takeover the old token can no longer complete, release or renew',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          const token = randomUUID();
          expect(
            await store.takeover({
              key: k,
              staleToken: owner.token,
              token,
              leaseMs: LONG_LEASE,
              ttlMs: LONG_TTL,
            }),
          ).toBe(true);
          const before = await mustGet(store, k);

          expect(
            await store.complete({
              key: k,
              token: owner.token,
              state: 'completed',
              outcome: '"late"',
              ttlMs: LONG_TTL,
            }),
          ).toBe(false);
          expect(await store.release(k, owner.token)).toBe(false);
          expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(false);
          expect(await mustGet(store, k)).toEqual(before);

          await complete(store, k, token, 'completed', '"new owner"');
          expect((await mustGet(store, k)).outcome).toBe('"new owner"');
        },
      );

      define(
        'complete is accepted once: a second complete with another outcome or state returns false and keeps the first',
        async ({ store }) => {
          const k = key();
          const owner = claimInput(k);
          await acquire(store, owner);
          await complete(store, k, owner.token, 'completed', '"first"');
          const before = await mustGet(store, k);
          for (const [state, outcome] of [
            ['completed', '"second"'],
            ['failed', '"second"'],
            ['failed', '"first"'],
            ['completed', '"first" '],
            ['completed', '"firs'],
            ['completed', ''],
          ] as const) {
            expect(
              await store.complete({ key: k, token: owner.token, state, outcome, ttlMs: LONG_TTL }),
            ).toBe(false);
          }
          const record = await mustGet(store, k);
          expect(record).toEqual(before);
          expect(record.state).toBe('completed');
          expect(record.outcome).toBe('"first"');
        },
      );

      define(
        'release and renew after complete return false and the record stays finished',
        async ({ store }) => {
          const base = key();
          for (const state of ['completed', 'failed'] as const) {
            const k = `${base}-${state}`;
            const owner = claimInput(k);
            await acquire(store, owner);
            await complete(store, k, owner.token, state, `"${state}"`);
            const before = await mustGet(store, k);
            expect(await store.release(k, owner.token)).toBe(false);
            expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(false);
            expect(await mustGet(store, k)).toEqual(before);
            expectStatus(await store.claim(claimInput(k)), 'completed');
          }
        },
      );

      define(
        'the owner may complete after its lease ran out as long as nobody took over',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          expectStatus(await store.claim(claimInput(k)), 'stale');
          await complete(store, k, owner.token, 'completed', '"late but mine"');
          const result = expectStatus(await store.claim(claimInput(k)), 'completed');
          expect(result.record.outcome).toBe('"late but mine"');
        },
      );
    });

    describe('retries: every operation may be sent again (its reply was lost)', () => {
      define(
        'a claim sent again with its own token answers acquired, with the record as stored, and changes nothing',
        async ({ store }) => {
          const k = key();
          const meta = { toolName: 'charge', scope: 's', turnId: 't' };
          const owner = claimInput(k, { meta });
          const initial = await options.raw?.count(store);
          const first = await acquire(store, owner);
          const stored = await mustGet(store, k);
          for (let i = 0; i < 3; i++) {
            const again = expectStatus(await store.claim(owner), 'acquired');
            expect(again.token).toBe(owner.token);
            expect(again.record).toEqual(stored);
          }
          expect(first).toEqual(stored);
          expect(await mustGet(store, k)).toEqual(stored);
          const counted = await options.raw?.count(store);
          if (initial !== undefined && counted !== undefined) expect(counted).toBe(initial + 1);
          // Nobody else is let in: another attempt still sees the owner running.
          const other = expectStatus(await store.claim(claimInput(k)), 'in_progress');
          expect(other.record.token).toBe(owner.token);
          // The owner goes on as after its first claim.
          await complete(store, k, owner.token, 'completed', '"once"');
          const replay = expectStatus(await store.claim(owner), 'completed');
          expect(replay.record.outcome).toBe('"once"');
        },
      );

      define(
        'a claim sent again with its own token meets a finished record: completed; with another fingerprint: drift',
        async ({ store }) => {
          const base = key();
          for (const state of ['completed', 'failed'] as const) {
            const k = `${base}-${state}`;
            const owner = claimInput(k);
            await acquire(store, owner);
            await complete(store, k, owner.token, state, `"${state}"`);
            const before = await mustGet(store, k);
            const result = expectStatus(await store.claim(owner), 'completed');
            expect(result.record).toEqual(before);
            expectStatus(await store.claim({ ...owner, fingerprint: FP_B }), 'drift');
            expect(await mustGet(store, k)).toEqual(before);
          }
          const k = `${base}-running`;
          const owner = claimInput(k);
          await acquire(store, owner);
          const before = await mustGet(store, k);
          const drift = expectStatus(await store.claim({ ...owner, fingerprint: FP_B }), 'drift');
          expect(drift.record).toEqual(before);
          expect(await mustGet(store, k)).toEqual(before);
        },
      );

      defineTimed(
        'a claim sent again with its own token after its lease ran out acquires with a renewed lease: the old lease can no longer be taken over',
        async ({ store, clock, t }) => {
          const lease = t.ms(100);
          const k = key();
          const owner = claimInput(k, { leaseMs: lease, ttlMs: LONG_TTL });
          const original = await acquire(store, owner);
          await clock.advance(t.ms(150));
          expectStatus(await store.claim(claimInput(k)), 'stale');
          const reclaimedAt = clock.now();
          const again = expectStatus(await store.claim(owner), 'acquired');
          const taken = await store.takeover({
            key: k,
            staleToken: owner.token,
            token: randomUUID(),
            leaseMs: LONG_LEASE,
            ttlMs: LONG_TTL,
          });
          const other = await store.claim(claimInput(k));
          t.within(reclaimedAt, lease);
          expect(again.token).toBe(owner.token);
          expect(again.record.token).toBe(owner.token);
          expect(again.record.state).toBe('in_progress');
          expect(again.record.createdAt).toBe(original.createdAt);
          expect(again.record.leaseExpiresAt).toBeGreaterThan(original.leaseExpiresAt);
          expect(again.record.expiresAt).toBeGreaterThanOrEqual(again.record.leaseExpiresAt);
          expect(await mustGet(store, k)).toEqual(again.record);
          expect(taken).toBe(false);
          expect(expectStatus(other, 'in_progress').record.token).toBe(owner.token);
        },
      );

      define(
        'concurrent own-token claim and takeover of a stale record: exactly one wins',
        async ({ store, clock }) => {
          const base = key();
          const owners = Array.from({ length: Math.min(concurrency, 20) }, (_, i) =>
            claimInput(`${base}-${i}`, { leaseMs: LEASE, ttlMs: LONG_TTL }),
          );
          for (const input of owners) await acquire(store, input);
          await clock.advance(ms(150));
          const takers = owners.map(() => randomUUID());
          const races = await Promise.all(
            owners.map((input, i) =>
              Promise.all([
                store.claim({ ...input, leaseMs: LONG_LEASE }),
                store.takeover({
                  key: input.key,
                  staleToken: input.token,
                  token: takers[i]!,
                  leaseMs: LONG_LEASE,
                  ttlMs: LONG_TTL,
                }),
              ]),
            ),
          );
          for (const [i, [claimed, taken]] of races.entries()) {
            expect(Number(claimed.status === 'acquired') + Number(taken)).toBe(1);
            const record = await mustGet(store, owners[i]!.key);
            expect(record.token).toBe(taken ? takers[i] : owners[i]!.token);
            // Lost to the takeover: the claim saw the new owner, or (its own record, a moment
            // before) a stale lease it could not renew; never acquired.
            if (taken) expect(['in_progress', 'stale']).toContain(claimed.status);
            expectStatus(await store.claim(claimInput(owners[i]!.key)), 'in_progress');
          }
        },
      );

      define(
        'complete sent again with the same token, state and outcome returns true and changes nothing',
        async ({ store }) => {
          const base = key();
          for (const [i, outcome] of ['"done"', AWKWARD_OUTCOMES[2]!, bigOutcome(), ''].entries()) {
            for (const state of ['completed', 'failed'] as const) {
              const k = `${base}-${state}-${i}`;
              const owner = claimInput(k);
              await acquire(store, owner);
              const input = { key: k, token: owner.token, state, outcome, ttlMs: LONG_TTL };
              expect(await store.complete(input)).toBe(true);
              const before = await mustGet(store, k);
              expect(await store.complete(input)).toBe(true);
              expect(await store.complete({ ...input, ttlMs: LONG_TTL * 2 })).toBe(true);
              expect(await mustGet(store, k)).toEqual(before);
              // Not by another token, not with another state or outcome.
              expect(await store.complete({ ...input, token: randomUUID() })).toBe(false);
              const other = state === 'completed' ? 'failed' : 'completed';
              expect(await store.complete({ ...input, state: other })).toBe(false);
              expect(await store.complete({ ...input, outcome: `${outcome}x` })).toBe(false);
              expect(await mustGet(store, k)).toEqual(before);
              const replay = expectStatus(await store.claim(claimInput(k)), 'completed');
              expect(replay.record.outcome).toBe(outcome);
            }
          }
        },
      );

      define(
        'complete sent again by the owner after another attempt took over and finished returns false',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          const token = randomUUID();
          expect(
            await store.takeover({
              key: k,
              staleToken: owner.token,
              token,
              leaseMs: LONG_LEASE,
              ttlMs: LONG_TTL,
            }),
          ).toBe(true);
          await complete(store, k, token, 'completed', '"same"');
          const before = await mustGet(store, k);
          expect(
            await store.complete({
              key: k,
              token: owner.token,
              state: 'completed',
              outcome: '"same"',
              ttlMs: LONG_TTL,
            }),
          ).toBe(false);
          expect(await mustGet(store, k)).toEqual(before);
        },
      );

      define(
        'takeover sent again by the new owner returns true and changes nothing; by anyone else false',
        async ({ store, clock }) => {
          const k = key();
          const owner = claimInput(k, { leaseMs: LEASE });
          await acquire(store, owner);
          await clock.advance(ms(150));
          const input = {
            key: k,
            staleToken: owner.token,
            token: randomUUID(),
            leaseMs: LONG_LEASE,
            ttlMs: LONG_TTL,
          };
          expect(await store.takeover(input)).toBe(true);
          const before = await mustGet(store, k);
          expect(await store.takeover(input)).toBe(true);
          expect(await store.takeover({ ...input, leaseMs: LONG_LEASE * 2 })).toBe(true);
          expect(await mustGet(store, k)).toEqual(before);
          expect(await store.takeover({ ...input, token: randomUUID() })).toBe(false);
          expect(await mustGet(store, k)).toEqual(before);
          // Once the new owner finished, a late copy of its takeover changes nothing.
          await complete(store, k, input.token, 'completed', '"taken"');
          const finished = await mustGet(store, k);
          expect(await store.takeover(input)).toBe(false);
          expect(await mustGet(store, k)).toEqual(finished);
        },
      );

      define(
        'renew sent again by the owner returns true; release sent again returns false (it cannot be told from a release that lost)',
        async ({ store }) => {
          const k = key();
          const owner = claimInput(k);
          await acquire(store, owner);
          expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(true);
          expect(await store.renew(k, owner.token, LONG_LEASE)).toBe(true);
          expectStatus(await store.claim(claimInput(k)), 'in_progress');
          expect(await store.release(k, owner.token)).toBe(true);
          expect(await store.release(k, owner.token)).toBe(false);
          expect(await store.get(k)).toBeUndefined();
          // A claim sent again after the release is a new claim: it acquires a new record.
          const again = await acquire(store, owner);
          expect(again.token).toBe(owner.token);
        },
      );
    });

    describe('release and renew', () => {
      define('release deletes the record and the key can be claimed again', async ({ store }) => {
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
        expect(await store.release(k, owner.token)).toBe(true);
        expect(await store.get(k)).toBeUndefined();
        expect(await store.release(k, owner.token)).toBe(false);

        // The record is gone: even another fingerprint acquires (no drift against a deleted record).
        const next = claimInput(k, { fingerprint: FP_B });
        const record = await acquire(store, next);
        expect(record.fingerprint).toBe(FP_B);
        expect(record.token).toBe(next.token);
      });

      defineTimed(
        'renew extends the lease: the record is not stale when the first lease would have run out',
        async ({ store, clock, t }) => {
          const lease = t.ms(100);
          const k = key();
          const owner = claimInput(k, { leaseMs: lease });
          const claimedAt = clock.now();
          const original = await acquire(store, owner);
          await clock.advance(t.ms(60));
          const before = clock.now();
          const renewedInTime = await store.renew(k, owner.token, lease);
          t.within(claimedAt, lease);
          expect(renewedInTime).toBe(true);
          const after = clock.now();
          const renewed = await mustGet(store, k);
          expect(renewed.leaseExpiresAt).toBeGreaterThan(original.leaseExpiresAt);
          expectStoreTime(renewed.leaseExpiresAt, before + lease, after + lease);
          expect({ ...renewed, leaseExpiresAt: 0, expiresAt: 0 }).toEqual({
            ...original,
            leaseExpiresAt: 0,
            expiresAt: 0,
          });
          expect(renewed.expiresAt).toBeGreaterThanOrEqual(renewed.leaseExpiresAt);

          await clock.advance(t.ms(60)); // past the first lease, inside the renewed one
          const inside = await store.claim(claimInput(k));
          t.within(before, lease);
          expectStatus(inside, 'in_progress');
          await clock.advance(t.ms(90)); // past the renewed lease
          expectStatus(await store.claim(claimInput(k)), 'stale');
        },
      );
    });

    describe('ttl', () => {
      defineTimed('a completed record disappears after its ttl', async ({ store, clock, t }) => {
        const ttl = t.ms(300);
        const k = key();
        const owner = claimInput(k, { leaseMs: t.ms(100) });
        await acquire(store, owner);
        const completedAt = clock.now();
        await complete(store, k, owner.token, 'completed', '"kept"', ttl);
        const record = await mustGet(store, k);
        near(record.expiresAt - (record.completedAt ?? Number.NaN), ttl, tolerance);

        await clock.advance(t.ms(150));
        const inside = await store.claim(claimInput(k));
        t.within(completedAt, ttl);
        expectStatus(inside, 'completed');
        await clock.advance(t.ms(200));
        expect(await store.get(k)).toBeUndefined();
        // Gone, not drifting: another fingerprint acquires.
        await acquire(store, claimInput(k, { fingerprint: FP_B }));
      });

      defineTimed('retention is counted from completion', async ({ store, clock, t }) => {
        const ttl = t.ms(150);
        const k = key();
        const owner = claimInput(k, { leaseMs: t.ms(60), ttlMs: ttl });
        const claimedAt = clock.now();
        await acquire(store, owner);
        await clock.advance(t.ms(100));
        const completedAt = clock.now();
        const stored = await store.complete({
          key: k,
          token: owner.token,
          state: 'completed',
          outcome: '"done"',
          ttlMs: ttl,
        });
        t.within(claimedAt, ttl); // completed before the claim's ttl ran out
        expect(stored).toBe(true);
        await clock.advance(t.ms(100)); // past the claim's ttl, inside the completion's
        const inside = await store.claim(claimInput(k));
        t.within(completedAt, ttl);
        const result = expectStatus(inside, 'completed');
        expect(result.record.outcome).toBe('"done"');
        await clock.advance(t.ms(100)); // past the completion's ttl
        expect(await store.get(k)).toBeUndefined();
        await acquire(store, claimInput(k));
      });

      defineTimed(
        'an in_progress record outlives its lease (stale) until its ttl',
        async ({ store, clock, t }) => {
          const ttl = t.ms(200);
          const k = key();
          const owner = claimInput(k, { leaseMs: t.ms(60), ttlMs: ttl });
          const claimedAt = clock.now();
          await acquire(store, owner);
          await clock.advance(t.ms(100));
          const stale = await store.claim(claimInput(k));
          const record = await store.get(k);
          t.within(claimedAt, ttl);
          expectStatus(stale, 'stale');
          expect(record?.token).toBe(owner.token);
          await clock.advance(t.ms(150));
          expect(await store.get(k)).toBeUndefined();
          await acquire(store, claimInput(k));
        },
      );

      defineTimed('ttl has millisecond precision', async ({ store, clock, t }) => {
        const base = key();
        const long = claimInput(`${base}-long`, { leaseMs: t.ms(30), ttlMs: t.ms(250) });
        const short = claimInput(`${base}-short`, { leaseMs: t.ms(30), ttlMs: t.ms(250) });
        const longRunning = claimInput(`${base}-long-running`, {
          leaseMs: t.ms(20),
          ttlMs: t.ms(150),
        });
        const shortRunning = claimInput(`${base}-short-running`, {
          leaseMs: t.ms(20),
          ttlMs: t.ms(50),
        });
        const longRunningAt = clock.now();
        await acquire(store, longRunning);
        for (const input of [long, short, shortRunning]) await acquire(store, input);
        await complete(store, short.key, short.token, 'completed', '"short"', t.ms(50));
        const longAt = clock.now();
        await complete(store, long.key, long.token, 'completed', '"long"', t.ms(150));

        await clock.advance(t.ms(100));
        expect(await store.get(short.key)).toBeUndefined();
        expect(await store.get(shortRunning.key)).toBeUndefined();
        const longRecord = await store.get(long.key);
        const longRunningRecord = await store.get(longRunning.key);
        t.within(longRunningAt, t.ms(150));
        t.within(longAt, t.ms(150));
        expect(longRecord?.outcome).toBe('"long"');
        expect(longRunningRecord?.state).toBe('in_progress');

        await clock.advance(t.ms(100));
        expect(await store.get(long.key)).toBeUndefined();
        expect(await store.get(longRunning.key)).toBeUndefined();
      });

      define('expired records are invisible to every operation', async ({ store, clock }) => {
        const base = key();
        const ops = ['complete', 'release', 'renew', 'takeover', 'get', 'claim'] as const;
        const owners = new Map(
          ops.map((op) => [op, claimInput(`${base}-${op}`, { leaseMs: ms(60), ttlMs: ms(100) })]),
        );
        const created = new Map<string, IdempotencyRecord>();
        for (const [op, input] of owners) created.set(op, await acquire(store, input));
        await clock.advance(ms(150));

        // One key per operation, so each one meets an expired record nothing else touched.
        const owner = (op: (typeof ops)[number]): ClaimInput => owners.get(op)!;
        expect(
          await store.complete({
            key: owner('complete').key,
            token: owner('complete').token,
            state: 'completed',
            outcome: '"too late"',
            ttlMs: LONG_TTL,
          }),
        ).toBe(false);
        expect(await store.release(owner('release').key, owner('release').token)).toBe(false);
        expect(await store.renew(owner('renew').key, owner('renew').token, LONG_LEASE)).toBe(false);
        expect(
          await store.takeover({
            key: owner('takeover').key,
            staleToken: owner('takeover').token,
            token: randomUUID(),
            leaseMs: LONG_LEASE,
            ttlMs: LONG_TTL,
          }),
        ).toBe(false);
        expect(await store.get(owner('get').key)).toBeUndefined();
        const fresh = await acquire(store, claimInput(owner('claim').key, { fingerprint: FP_B }));
        expect(fresh.createdAt).toBeGreaterThan(created.get('claim')!.createdAt);

        for (const op of ops) {
          if (op !== 'claim') expect(await store.get(owner(op).key)).toBeUndefined();
        }
      });

      /** Expiring records of earlier attempts of the clause below not purged yet, per store. */
      const purgeLeftovers = new WeakMap<S, number>();
      defineTimed(
        'purgeExpired (when present) removes expired records and returns how many',
        async ({ store, clock, t }) => {
          if (store.purgeExpired === undefined) return;
          const raw = options.raw;
          const rawCount = async (): Promise<number | undefined> =>
            raw === undefined ? undefined : raw.count(store);
          const base = key();
          const initial = await rawCount();

          const ttl = t.ms(60);
          const expiring = [
            claimInput(`${base}-running`, { leaseMs: t.ms(30), ttlMs: ttl }),
            claimInput(`${base}-stale`, { leaseMs: t.ms(30), ttlMs: ttl }),
            claimInput(`${base}-done`, { leaseMs: t.ms(30), ttlMs: ttl }),
          ];
          const live = claimInput(`${base}-live`);
          const startedAt = clock.now();
          for (const input of [...expiring, live]) await acquire(store, input);
          purgeLeftovers.set(store, (purgeLeftovers.get(store) ?? 0) + expiring.length);
          const done = expiring[2]!;
          const completed = await store.complete({
            key: done.key,
            token: done.token,
            state: 'completed',
            outcome: '"done"',
            ttlMs: ttl,
          });
          // Its lease (30 ms x the attempt's factor) must still have been live when it completed:
          // on a loaded machine it may not be, and the attempt proves nothing.
          if (!completed) t.within(startedAt, t.ms(30));
          expect(completed).toBe(true);
          const populated = await rawCount();
          // Counted before any of them could expire (an engine may remove expired records itself).
          t.within(startedAt, ttl);
          if (initial !== undefined && populated !== undefined) {
            expect(populated).toBeGreaterThanOrEqual(initial + expiring.length + 1);
          }

          await clock.advance(t.ms(120));
          const before = await rawCount();
          const removed = await store.purgeExpired();
          const after = await rawCount();
          expect(removed).toBeGreaterThanOrEqual(0);
          // An earlier attempt that missed its window (same store) left records that expired
          // since: they are purged now too.
          expect(removed).toBeLessThanOrEqual(purgeLeftovers.get(store) ?? 0);
          purgeLeftovers.set(store, 0);
          if (before !== undefined && after !== undefined && populated !== undefined) {
            expect(after).toBeLessThanOrEqual(populated - expiring.length);
            // What purgeExpired removed is gone; an engine with its own expiry (Redis) may also
            // have removed some between the two counts, never fewer.
            expect(before - after).toBeGreaterThanOrEqual(removed);
            if (mode === 'virtual') expect(before - after).toBe(removed);
          }
          expect(await store.purgeExpired()).toBe(0);
          expect((await mustGet(store, live.key)).token).toBe(live.token);
          for (const input of expiring) expect(await store.get(input.key)).toBeUndefined();
        },
      );
    });

    describe('concurrency', () => {
      define(
        `executor: ${executorConcurrency} concurrent calls of one tool call run it once, and every caller gets its outcome`,
        async ({ store }) => {
          const idempotency = createIdempotency({ store });
          const call = { toolName: 'conformance', turnId: key(), args: { amount: 1 } };
          let runs = 0;
          const results = await Promise.all(
            Array.from({ length: executorConcurrency }, () =>
              idempotency.run(call, async () => {
                runs++;
                await sleep(20);
                return { run: runs };
              }),
            ),
          );
          expect(runs).toBe(1);
          expect(results.filter((r) => !r.replayed).length).toBe(1);
          expect(results.every((r) => JSON.stringify(r.value) === '{"run":1}')).toBe(true);
        },
      );
      define(
        `concurrent claims on one key: exactly one acquires, the others see in_progress`,
        async ({ store }) => {
          const k = key();
          const inputs = Array.from({ length: concurrency }, () => claimInput(k));
          const results = await Promise.all(inputs.map((input) => store.claim(input)));
          expect(count(results, 'acquired')).toBe(1);
          expect(count(results, 'in_progress')).toBe(concurrency - 1);
          const winner = inputs[results.findIndex((r) => r.status === 'acquired')]!;
          for (const result of results) expect(result.record.token).toBe(winner.token);
          expect((await mustGet(store, k)).token).toBe(winner.token);
        },
      );

      define(
        'concurrent claims with two fingerprints on one key: one acquires, the rest see in_progress or drift',
        async ({ store }) => {
          const k = key();
          const inputs = Array.from({ length: concurrency }, (_, i) =>
            claimInput(k, { fingerprint: i % 2 === 0 ? FP_A : FP_B }),
          );
          const results = await Promise.all(inputs.map((input) => store.claim(input)));
          expect(count(results, 'acquired')).toBe(1);
          const winner = inputs[results.findIndex((r) => r.status === 'acquired')]!;
          for (const [i, result] of results.entries()) {
            if (result.status === 'acquired') continue;
            const same = inputs[i]!.fingerprint === winner.fingerprint;
            expect(result.status).toBe(same ? 'in_progress' : 'drift');
            expect(result.record.token).toBe(winner.token);
          }
        },
      );

      define('concurrent claims on distinct keys all acquire', async ({ store }) => {
        const base = key();
        const inputs = Array.from({ length: concurrency }, (_, i) => claimInput(`${base}-${i}`));
        const results = await Promise.all(inputs.map((input) => store.claim(input)));
        expect(count(results, 'acquired')).toBe(concurrency);
        const records = await Promise.all(inputs.map((input) => store.get(input.key)));
        for (const [i, record] of records.entries()) expect(record?.token).toBe(inputs[i]!.token);
      });

      define(
        'concurrent complete and release by the owner: exactly one wins',
        async ({ store }) => {
          const base = key();
          const owners = Array.from({ length: Math.min(concurrency, 20) }, (_, i) =>
            claimInput(`${base}-${i}`),
          );
          for (const input of owners) await acquire(store, input);
          const races = await Promise.all(
            owners.map((input) =>
              Promise.all([
                store.complete({
                  key: input.key,
                  token: input.token,
                  state: 'completed',
                  outcome: '"won"',
                  ttlMs: LONG_TTL,
                }),
                store.release(input.key, input.token),
              ]),
            ),
          );
          for (const [i, [completed, released]] of races.entries()) {
            expect(Number(completed) + Number(released)).toBe(1);
            const record = await store.get(owners[i]!.key);
            if (completed) expect(record?.state).toBe('completed');
            else expect(record).toBeUndefined();
          }
        },
      );

      define(
        'concurrent renew by the stale owner and takeover: exactly one wins',
        async ({ store, clock }) => {
          const base = key();
          const owners = Array.from({ length: Math.min(concurrency, 20) }, (_, i) =>
            claimInput(`${base}-${i}`, { leaseMs: LEASE, ttlMs: LONG_TTL }),
          );
          for (const input of owners) await acquire(store, input);
          await clock.advance(ms(150));
          const takers = owners.map(() => randomUUID());
          const races = await Promise.all(
            owners.map((input, i) =>
              Promise.all([
                store.renew(input.key, input.token, LONG_LEASE),
                store.takeover({
                  key: input.key,
                  staleToken: input.token,
                  token: takers[i]!,
                  leaseMs: LONG_LEASE,
                  ttlMs: LONG_TTL,
                }),
              ]),
            ),
          );
          for (const [i, [renewed, taken]] of races.entries()) {
            expect(Number(renewed) + Number(taken)).toBe(1);
            const record = await mustGet(store, owners[i]!.key);
            expect(record.token).toBe(taken ? takers[i] : owners[i]!.token);
            expectStatus(await store.claim(claimInput(owners[i]!.key)), 'in_progress');
          }
        },
      );
    });

    describe('waitForChange', () => {
      // Long waits: resolving before the timeout proves a push woke the waiter, on any machine.
      const WAIT = ms(20_000);

      define('waitForChange (when present) resolves promptly after complete', async ({ store }) => {
        if (store.waitForChange === undefined) return;
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
        const waiting = watch(store.waitForChange(k, WAIT));
        await sleep(ms(50));
        expect(waiting.state()).toBe('pending');
        const changedAt = performance.now();
        await complete(store, k, owner.token);
        expect(await waiting.settle(WAIT / 2)).toBe('resolved');
        expect(performance.now() - changedAt).toBeLessThan(WAIT / 2);
      });

      define('waitForChange (when present) resolves promptly after release', async ({ store }) => {
        if (store.waitForChange === undefined) return;
        const k = key();
        const owner = claimInput(k);
        await acquire(store, owner);
        const waiting = watch(store.waitForChange(k, WAIT));
        await sleep(ms(50));
        expect(waiting.state()).toBe('pending');
        const changedAt = performance.now();
        expect(await store.release(k, owner.token)).toBe(true);
        expect(await waiting.settle(WAIT / 2)).toBe('resolved');
        expect(performance.now() - changedAt).toBeLessThan(WAIT / 2);
      });

      define(
        'waitForChange (when present) resolves after its timeout when nothing happens',
        async ({ store }) => {
          if (store.waitForChange === undefined) return;
          const k = key();
          await acquire(store, claimInput(k));
          const timeout = ms(100);
          for (const target of [k, key('missing')]) {
            const start = performance.now();
            const waiting = watch(store.waitForChange(target, timeout));
            expect(await waiting.settle(timeout + ms(10_000))).toBe('resolved');
            const elapsed = performance.now() - start;
            expect(elapsed).toBeGreaterThanOrEqual(timeout * 0.8);
          }
        },
      );

      define(
        'waitForChange (when present) resolves at once when its signal aborts and keeps no timer',
        async ({ store }) => {
          if (store.waitForChange === undefined) return;
          const k = key();
          await acquire(store, claimInput(k));
          const timers = () =>
            process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
          const before = timers();
          const cancel = new AbortController();
          const waits = Array.from({ length: 200 }, () =>
            watch(store.waitForChange!(k, ms(60_000), cancel.signal)),
          );
          await sleep(ms(20));
          cancel.abort();
          for (const wait of waits) expect(await wait.settle(ms(5_000))).toBe('resolved');
          // 200 waits that left their timers would leave 200 (or more) behind.
          expect(timers() - before).toBeLessThan(20);
          // An already aborted signal: resolved without waiting.
          const late = watch(store.waitForChange(k, ms(60_000), cancel.signal));
          expect(await late.settle(ms(5_000))).toBe('resolved');
        },
      );

      define('waitForChange (when present) does not hang after close', async ({ store }) => {
        if (store.waitForChange === undefined || store.close === undefined) return;
        const k = key();
        await acquire(store, claimInput(k));
        const pending = watch(store.waitForChange(k, ms(10_000)));
        await sleep(ms(20));
        await store.close();
        expect(SETTLED).toContain(await pending.settle(ms(5_000)));
        // A wait that starts after close does not hang either.
        const late = watch(store.waitForChange(k, ms(50)));
        expect(SETTLED).toContain(await late.settle(ms(5_000)));
      });
    });

    describe('inspection (list, stats: optional)', () => {
      /**
       * Records of one tool in every inspection state, plus an expired one, one of another tool
       * and one without meta. Returns their keys; the stale one's lease has run out.
       */
      const populate = async (store: S, clock: TestClock) => {
        const base = key('inspect');
        const tool = `inspect-${randomUUID()}`;
        const k = {
          completed: `${base}-completed`,
          failed: `${base}-failed`,
          running: `${base}-running`,
          stale: `${base}-stale`,
          expired: `${base}-expired`,
          other: `${base}{other}*?[`,
          bare: `${base}-bare`,
        };
        const meta = (turnId: string, scope: string) => ({ toolName: tool, turnId, scope });
        const completed = claimInput(k.completed, { meta: meta('turn-a', 's1') });
        const failed = claimInput(k.failed, { meta: meta('turn-b', 's1') });
        const running = claimInput(k.running, { meta: meta('turn-a', 's2') });
        const stale = claimInput(k.stale, { leaseMs: LEASE, meta: meta('turn-c', 's1') });
        const expired = claimInput(k.expired, {
          leaseMs: ms(50),
          ttlMs: ms(50),
          meta: meta('turn-a', 's1'),
        });
        const other = claimInput(k.other, { meta: { toolName: `${tool}-other` } });
        const bare = claimInput(k.bare);
        for (const input of [completed, failed, running, stale, expired, other, bare]) {
          await acquire(store, input);
        }
        await complete(store, k.completed, completed.token, 'completed', '{"ok":"é"}');
        await complete(store, k.failed, failed.token, 'failed', '{"e":1}');
        await complete(store, k.other, other.token, 'completed', '1');
        await clock.advance(ms(150));
        return { tool, k };
      };

      /** Every page of `filter`; checks page sizes and that no key comes twice. */
      const listAll = async (store: S, filter: ListFilter = {}): Promise<ListedRecord[]> => {
        const list = store.list!.bind(store);
        const records: ListedRecord[] = [];
        let cursor: string | undefined;
        for (let pages = 0; pages < 10_000; pages++) {
          const page: RecordPage = await list({
            ...filter,
            ...(cursor === undefined ? {} : { cursor }),
          });
          expect(page.records.length).toBeLessThanOrEqual(filter.limit ?? 100);
          records.push(...page.records);
          cursor = page.cursor;
          if (cursor === undefined) break;
          expect(typeof cursor).toBe('string');
        }
        expect(cursor).toBeUndefined();
        expect(new Set(records.map((r) => r.key)).size).toBe(records.length);
        return records;
      };
      const keysOf = (records: readonly ListedRecord[]) => records.map((r) => r.key).sort();

      define(
        'list (when present) returns live records without outcomes, filtered by tool, turn, scope and state',
        async ({ store, clock }) => {
          if (store.list === undefined) return;
          const { tool, k } = await populate(store, clock);
          const mine = await listAll(store, { toolName: tool });
          expect(keysOf(mine)).toEqual([k.completed, k.failed, k.running, k.stale].sort());
          const byKey = new Map(mine.map((r) => [r.key, r]));
          const states = Object.fromEntries(mine.map((r) => [r.key, r.inspectionState]));
          expect(states).toEqual({
            [k.completed]: 'completed',
            [k.failed]: 'failed',
            [k.running]: 'in_progress',
            [k.stale]: 'stale',
          });
          for (const record of mine) {
            expect((record as { outcome?: string }).outcome).toBeUndefined();
            const stored = await mustGet(store, record.key);
            const { outcome: _outcome, ...rest } = stored;
            const { inspectionState: _state, outcomeBytes: _bytes, ...listed } = record;
            expect(listed).toEqual(rest);
          }
          expect(byKey.get(k.completed)?.outcomeBytes).toBe(Buffer.byteLength('{"ok":"é"}'));
          expect(byKey.get(k.failed)?.outcomeBytes).toBe(7);
          expect(byKey.get(k.running)?.outcomeBytes).toBeUndefined();
          expect(byKey.get(k.running)?.meta).toEqual({
            toolName: tool,
            turnId: 'turn-a',
            scope: 's2',
          });

          for (const [state, expected] of [
            ['in_progress', [k.running]],
            ['stale', [k.stale]],
            ['completed', [k.completed]],
            ['failed', [k.failed]],
          ] as const) {
            expect(keysOf(await listAll(store, { toolName: tool, state }))).toEqual([...expected]);
          }
          expect(keysOf(await listAll(store, { toolName: tool, turnId: 'turn-a' }))).toEqual(
            [k.completed, k.running].sort(),
          );
          expect(keysOf(await listAll(store, { toolName: tool, scope: 's1' }))).toEqual(
            [k.completed, k.failed, k.stale].sort(),
          );
          expect(keysOf(await listAll(store, { turnId: 'turn-c', scope: 's1' }))).toEqual([
            k.stale,
          ]);
          expect(keysOf(await listAll(store, { toolName: `${tool}-nobody` }))).toEqual([]);

          // The store's own keyspace, unfiltered: everything live, the expired record not.
          const all = keysOf(await listAll(store));
          expect(all).toEqual([k.completed, k.failed, k.running, k.stale, k.other, k.bare].sort());
        },
      );

      define(
        'list (when present) pages with limit and cursor: every record exactly once',
        async ({ store }) => {
          if (store.list === undefined) return;
          const tool = `page-${randomUUID()}`;
          const base = key('page');
          const keys = Array.from(
            { length: 23 },
            (_, i) => `${base}-${String(i).padStart(2, '0')}`,
          );
          for (const k of keys) await acquire(store, claimInput(k, { meta: { toolName: tool } }));
          for (const limit of [1, 5, 7, 23, 1000]) {
            expect(keysOf(await listAll(store, { toolName: tool, limit }))).toEqual(keys);
          }
          const first = await store.list({ toolName: tool, limit: 5 });
          expect(first.records.length).toBe(5);
          expect(typeof first.cursor).toBe('string');
          const last = await store.list({ toolName: tool, limit: 23 });
          expect(last.records.length).toBe(23);
        },
      );

      define(
        'stats (when present) counts live records by state, stale apart, per filter',
        async ({ store, clock }) => {
          if (store.stats === undefined) return;
          const before = clock.now();
          const { tool } = await populate(store, clock);
          const after = clock.now();
          const mine = await store.stats({ toolName: tool });
          expect({ ...mine, at: 0 }).toEqual({
            records: 4,
            inProgress: 1,
            stale: 1,
            completed: 1,
            failed: 1,
            at: 0,
          });
          expectStoreTime(mine.at, before, after);
          const all = await store.stats();
          expect({ ...all, at: 0 }).toEqual({
            records: 6,
            inProgress: 2,
            stale: 1,
            completed: 2,
            failed: 1,
            at: 0,
          });
          const turnA = await store.stats({ toolName: tool, turnId: 'turn-a', scope: 's2' });
          expect(turnA.records).toBe(1);
          expect(turnA.inProgress).toBe(1);
        },
      );

      define(
        'list and stats (when present) reject bad filters with InvalidInputError',
        async ({ store }) => {
          const bad: Array<[string, () => Promise<unknown>]> = [];
          if (store.list !== undefined) {
            const list = store.list.bind(store);
            for (const limit of [0, -1, 1.5, 1001]) bad.push(['limit', () => list({ limit })]);
            bad.push(['state', () => list({ state: 'running' as never })]);
            bad.push(['cursor', () => list({ cursor: 'not a cursor of this store' })]);
            bad.push(['toolName', () => list({ toolName: '' })]);
          }
          if (store.stats !== undefined) {
            const stats = store.stats.bind(store);
            bad.push(['scope', () => stats({ scope: 42 as never })]);
          }
          for (const [field, run] of bad) {
            let error: unknown;
            try {
              await run();
            } catch (e) {
              error = e;
            }
            expect(InvalidInputError.isInstance(error)).toBe(true);
            expect((error as InvalidInputError).field).toBe(field);
          }
        },
      );
    });

    describe('integrity', () => {
      define(
        'a record the store cannot read (corruptRecord, when given) is a RecordIntegrityError (corrupt), never StoreUnavailableError: fail-open never runs the tool',
        async ({ store }) => {
          const corrupt = options.corruptRecord;
          if (corrupt === undefined) return;
          const k = key('corrupt');
          await corrupt(store, k);
          for (const op of [() => store.claim(claimInput(k)), () => store.get(k)]) {
            const error = await errorOf(op());
            expect(RecordIntegrityError.isInstance(error)).toBe(true);
            expect(StoreUnavailableError.isInstance(error)).toBe(false);
            expect((error as RecordIntegrityError).reason).toBe('corrupt');
          }
          const idempotency = createIdempotency({ store, onStoreUnavailable: 'fail-open' });
          const call = { toolName: 'conformance', turnId: key('turn'), args: { n: 1 } };
          await corrupt(store, idempotency.keyOf(call).key);
          let runs = 0;
          for (let i = 0; i < 3; i++) {
            const error = await errorOf(
              idempotency.run(call, async () => {
                runs++;
                return 'ran over a corrupt record';
              }),
            );
            expect(RecordIntegrityError.isInstance(error)).toBe(true);
          }
          expect(runs).toBe(0);
        },
      );
    });

    describe('keys', () => {
      define(
        'malformed text (a lone surrogate) in meta or outcome: refused with InvalidInputError, or kept byte-exact',
        async ({ store }) => {
          const refusedOrKept = async <T>(
            op: () => Promise<T>,
            check: (value: T) => Promise<void>,
          ) => {
            let value: T;
            try {
              value = await op();
            } catch (error) {
              expect(InvalidInputError.isInstance(error)).toBe(true);
              return;
            }
            await check(value);
          };
          const metaInput = claimInput(key(), { meta: { toolName: 't', turnId: 'a\ud800b' } });
          await refusedOrKept(
            () => store.claim(metaInput),
            async () => expect((await mustGet(store, metaInput.key)).meta?.turnId).toBe('a\ud800b'),
          );
          const input = claimInput(key());
          await acquire(store, input);
          await refusedOrKept(
            () =>
              store.complete({
                key: input.key,
                token: input.token,
                state: 'completed',
                outcome: '"\udc00"',
                ttlMs: LONG_TTL,
              }),
            async () => expect((await mustGet(store, input.key)).outcome).toBe('"\udc00"'),
          );
        },
      );
      define('keys with awkward characters are independent records', async ({ store }) => {
        const base = key();
        const long = `${base}-`.padEnd(127, 'x');
        const keys = [
          base,
          `${base}:`,
          `${base}:a`,
          `${base}:a:b`,
          `${base}{a}`,
          `{${base}}`,
          `${base} a`,
          `${base} `,
          `${base}é`,
          `${base}e\u0301`,
          `${base}K`,
          `${base}k`,
          `${base}🔑 ключ 鍵`,
          `${base}*`,
          `${base}?`,
          `${base}%`,
          `${base}_`,
          `${base}/\\'"`,
          `${long}x`,
          `${long}y`,
        ];
        expect(new Set(keys).size).toBe(keys.length);
        expect(`${long}x`.length).toBe(128);

        const inputs = keys.map((k, i) => claimInput(k, { fingerprint: fingerprint(`key-${i}`) }));
        for (const input of inputs) await acquire(store, input);
        for (const [i, input] of inputs.entries()) {
          const record = await mustGet(store, input.key);
          expect({ key: record.key, fingerprint: record.fingerprint, token: record.token }).toEqual(
            {
              key: keys[i],
              fingerprint: input.fingerprint,
              token: input.token,
            },
          );
        }
        for (const [i, input] of inputs.entries()) {
          await complete(store, input.key, input.token, 'completed', `"outcome ${i}"`);
        }
        const released = claimInput(`${base}-released`);
        await acquire(store, released);
        expect(await store.release(released.key, released.token)).toBe(true);
        for (const [i, input] of inputs.entries()) {
          const result = expectStatus(
            await store.claim(claimInput(input.key, { fingerprint: input.fingerprint })),
            'completed',
          );
          expect(result.record.outcome).toBe(`"outcome ${i}"`);
        }
      });
    });

    defineSecurityTests({ describe, define, expect });
  });
}

/** Outcomes a store must keep byte-exact. */
const AWKWARD_OUTCOMES: readonly string[] = [
  '{"ok":true}',
  'héllo wörld — “curly” "straight" \'single\' `back` \\ \\\\ \\n (escaped) ',
  'line 1\nline 2\r\nline 3\ttab\u2028ls\u2029ps\n\n',
  'emoji 👩🏽‍💻 🇪🇺, CJK 你好世界, RTL שלום مرحبا, combining e\u0301, astral 𝄞\u{1F600}',
  '{"nested":"{\\"json\\":\\"in json\\"}","escaped":"\\u00e9\\u0000","n":12345678901234567890}',
  '',
  ' leading and trailing spaces ',
  bigOutcome(),
];

function bigOutcome(): string {
  const lines: string[] = [];
  let length = 0;
  for (let i = 0; length < 100_000; i++) {
    const line = `{"line":${i},"text":"ü€𝄞 \\"q\\" \\\\ '"}\n`;
    lines.push(line);
    length += line.length;
  }
  return lines.join('');
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

function fingerprint(label: string): string {
  return createHash('sha256').update(label).digest('base64url');
}

type Settlement = 'pending' | 'resolved' | 'rejected';
const SETTLED: readonly Settlement[] = ['resolved', 'rejected'];

/** Follow a promise's settlement without letting a rejection go unhandled. */
function watch(promise: Promise<unknown>): {
  state(): Settlement;
  settle(withinMs: number): Promise<Settlement>;
} {
  let state: Settlement = 'pending';
  const settled = promise.then(
    () => {
      state = 'resolved';
    },
    () => {
      state = 'rejected';
    },
  );
  return {
    state: () => state,
    settle: async (withinMs) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, withinMs);
      });
      await Promise.race([settled, deadline]);
      clearTimeout(timer);
      return state;
    },
  };
}
