import { randomUUID } from 'node:crypto';
import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  TakeoverInput,
} from '@idempotent-tools/core';
import { createTestClock, type TestClock } from '../clock.js';
import { fixtureTests, HANG_DETECTOR_MS } from '../fixture-tests.js';
import { inWindow, type Window } from '../timing.js';
import { uniqueKey } from '../unique-key.js';
import { FP_A, LONG_LEASE, LONG_TTL } from './shared.js';
import type {
  ConformanceContext,
  ConformanceFixture,
  StoreConformanceOptions,
  TestContext,
  Timing,
} from './types.js';

/** A window counts as kept only when this many ms of it are left (store clocks round to ms). */
const WINDOW_MARGIN = 3;

/** In `real` mode store timestamps are compared with the local clock within this skew. */
const CLOCK_SKEW = 60_000;

/**
 * Resolve `options` (defaults, checks: a bad `timeScale` or `concurrency` throws a `RangeError`
 * here, at registration) into the context every clause group defines its tests with.
 * @internal
 */
export function createConformanceContext<S extends IdempotencyStore>(
  options: StoreConformanceOptions<S>,
): ConformanceContext<S> {
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
  // A hang detector only: a clause's own waits are bounded by the clause, never by the runner.
  const timeoutMs =
    mode === 'real' ? Math.max(HANG_DETECTOR_MS, ms(HANG_DETECTOR_MS)) : HANG_DETECTOR_MS;
  const LEASE = ms(100);
  const TTL = ms(300);

  /** Tests of `timeout` ms, each with a fresh store and the clock it reads, destroyed after it. */
  const withStore = (timeout: number) =>
    fixtureTests<TestContext<S>>(
      options.test,
      timeout,
      async () => {
        const clock = createTestClock({ mode });
        return { clock, store: await options.createStore({ clock, timeoutMs: HANG_DETECTOR_MS }) };
      },
      ({ store }) =>
        options.destroyStore !== undefined ? options.destroyStore(store) : store.close?.(),
    );
  const define = withStore(timeoutMs);
  const defineWithWindow = withStore(mode === 'real' ? timeoutMs * 2 : timeoutMs);

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
  ): void =>
    defineWithWindow(name, async ({ store, clock }) => {
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
    });

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

  const completeInput = (
    k: string,
    token: string,
    state: 'completed' | 'failed' = 'completed',
    outcome = '{"ok":true}',
    ttlMs = LONG_TTL,
  ): CompleteInput => ({ key: k, token, state, outcome, ttlMs });

  const complete = async (
    store: IdempotencyStore,
    k: string,
    token: string,
    state?: 'completed' | 'failed',
    outcome?: string,
    ttlMs?: number,
  ): Promise<void> => {
    expect(await store.complete(completeInput(k, token, state, outcome, ttlMs))).toBe(true);
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

  const claimed = async (store: IdempotencyStore, overrides: Partial<ClaimInput> = {}) => {
    const k = key();
    const owner = claimInput(k, overrides);
    return { k, owner, record: await acquire(store, owner) };
  };

  const finished = async (store: IdempotencyStore, k: string, state: 'completed' | 'failed') => {
    const owner = claimInput(k);
    await acquire(store, owner);
    await complete(store, k, owner.token, state, `"${state}"`);
    return { owner, record: await mustGet(store, k) };
  };

  const staleOwner = async (store: IdempotencyStore, clock: TestClock) => {
    const stale = await claimed(store, { leaseMs: LEASE });
    await clock.advance(ms(150));
    return stale;
  };

  const takeoverInput = (
    k: string,
    staleToken: string,
    overrides: Partial<TakeoverInput> = {},
  ): TakeoverInput => ({
    key: k,
    staleToken,
    token: randomUUID(),
    leaseMs: LONG_LEASE,
    ttlMs: LONG_TTL,
    ...overrides,
  });

  const takenOver = async (store: IdempotencyStore, clock: TestClock) => {
    const stale = await staleOwner(store, clock);
    const takeover = takeoverInput(stale.k, stale.owner.token);
    expect(await store.takeover(takeover)).toBe(true);
    return { ...stale, takeover };
  };

  const acquireOwners = async (store: IdempotencyStore, overrides: Partial<ClaimInput> = {}) => {
    const base = key();
    const owners = Array.from({ length: Math.min(concurrency, 20) }, (_, i) =>
      claimInput(`${base}-${i}`, overrides),
    );
    for (const input of owners) await acquire(store, input);
    return owners;
  };

  const raceTakeovers = async <T>(
    store: IdempotencyStore,
    clock: TestClock,
    rival: (owner: ClaimInput) => Promise<T>,
  ) => {
    const owners = await acquireOwners(store, { leaseMs: LEASE, ttlMs: LONG_TTL });
    await clock.advance(ms(150));
    const takers = owners.map(() => randomUUID());
    const races = await Promise.all(
      owners.map((owner, i) =>
        Promise.all([
          rival(owner),
          store.takeover(takeoverInput(owner.key, owner.token, { token: takers[i]! })),
        ]),
      ),
    );
    return { owners, takers, races };
  };

  const fixture: ConformanceFixture = {
    key,
    claimInput,
    expectStatus,
    acquire,
    mustGet,
    complete,
    completeInput,
    near,
    expectStoreTime,
    count,
    claimed,
    finished,
    staleOwner,
    takeoverInput,
    takenOver,
    acquireOwners,
    raceTakeovers,
  };
  return {
    options,
    describe,
    expect,
    mode,
    concurrency,
    executorConcurrency,
    ms,
    tolerance,
    LEASE,
    TTL,
    define,
    defineTimed,
    fixture,
  };
}
