import type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  IdempotencyRecord,
  IdempotencyStore,
  TakeoverInput,
} from '@idempotent-tools/core';
import type { TestClock } from '../clock.js';
import type { ExpectLike } from '../expect.js';

/** What `runStoreConformance` takes: the test runner, the store factory and the suite's toggles. */
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
   * `timeoutMs`: the deadline to give the store's operations when it has one (`timeoutMs` of the
   * built-in stores), a hang detector: the suite's storms queue hundreds of operations at once,
   * which a loaded machine can take longer than a default 5 s deadline to answer (a store's
   * deadline is tested by its own fault tests, not here).
   */
  createStore: (ctx: { clock: TestClock; timeoutMs: number }) => S | Promise<S>;
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

/** What one test's body gets: a fresh store and the clock it reads. */
export interface TestContext<S> {
  store: S;
  clock: TestClock;
}

/** The durations of one attempt of a timed clause (see `defineTimed`). */
export interface Timing {
  /** A duration of this attempt: the suite's `ms(base)` times the attempt's factor. */
  ms(base: number): number;
  /**
   * Call before asserting what holds only until `duration` ms after `since`. In `real` mode it
   * throws (and the attempt is repeated with longer durations) when that time has passed.
   */
  within(since: number, duration: number): void;
}

/**
 * What every clause group defines its tests with: the runner, the resolved options, the suite's
 * durations and the fixture. One per `runStoreConformance` call (see `createConformanceContext`).
 * @internal
 */
export interface ConformanceContext<S extends IdempotencyStore> {
  options: StoreConformanceOptions<S>;
  describe: StoreConformanceOptions<S>['describe'];
  expect: ExpectLike;
  mode: StoreConformanceOptions<S>['clock'];
  /** `options.concurrency ?? 200`. */
  concurrency: number;
  /** `options.executorConcurrency ?? 1000`. */
  executorConcurrency: number;
  /** A duration of the suite, scaled in `real` mode. */
  ms(base: number): number;
  /** Tolerance on differences of two store timestamps taken by one operation. */
  tolerance: number;
  /** A short lease (`ms(100)`): run out after `clock.advance(ms(150))`. */
  LEASE: number;
  /** A short TTL (`ms(300)`). */
  TTL: number;
  /** Register one test with a fresh store and clock, closed (or `destroyStore`d) after it. */
  define(name: string, body: (ctx: TestContext<S>) => Promise<void>): void;
  /** Register one test that needs a window of real time (see `createConformanceContext`). */
  defineTimed(name: string, body: (ctx: TestContext<S> & { t: Timing }) => Promise<void>): void;
  /** The records every clause sets up, and the checks they share. */
  fixture: ConformanceFixture;
}

/**
 * The shared fixture of the clause groups: keys, claims and the records they set up, and the
 * checks that assert through the caller's `expect`.
 * @internal
 */
export interface ConformanceFixture {
  /** A key no other test uses: `conformance-<label>-<uuid>`. */
  key(label?: string): string;
  /** A claim of `k` with fingerprint `FP_A`, a fresh token, a long lease and TTL. */
  claimInput(k: string, overrides?: Partial<ClaimInput>): ClaimInput;
  /** Require a claim answer of `status`; returns it narrowed. */
  expectStatus<T extends ClaimResult['status']>(
    result: ClaimResult,
    status: T,
  ): Extract<ClaimResult, { status: T }>;
  /** Claim `input` and require `acquired`; returns the record. */
  acquire(store: IdempotencyStore, input: ClaimInput): Promise<IdempotencyRecord>;
  /** The live record at `k`; fails the test when there is none. */
  mustGet(store: IdempotencyStore, k: string): Promise<IdempotencyRecord>;
  /** Complete `k` as its owner and require `true`. */
  complete(
    store: IdempotencyStore,
    k: string,
    token: string,
    state?: 'completed' | 'failed',
    outcome?: string,
    ttlMs?: number,
  ): Promise<void>;
  /** A complete of `k` by `token`: `completed` with `{"ok":true}` and a long TTL by default. */
  completeInput(
    k: string,
    token: string,
    state?: 'completed' | 'failed',
    outcome?: string,
    ttlMs?: number,
  ): CompleteInput;
  /** Require `actual` within `within` of `expected`. */
  near(actual: number, expected: number, within: number): void;
  /** A store timestamp read between local times `before` and `after`. */
  expectStoreTime(actual: number, before: number, after: number): void;
  /** How many of `results` are `what` (a boolean, or a claim status). */
  count(results: readonly (boolean | ClaimResult)[], what: boolean | string): number;
  /** A fresh key, acquired by `claimInput(k, overrides)`: the key, the claim, the record. */
  claimed(
    store: IdempotencyStore,
    overrides?: Partial<ClaimInput>,
  ): Promise<{ k: string; owner: ClaimInput; record: IdempotencyRecord }>;
  /**
   * `k` acquired and completed in `state` with the outcome `"<state>"`: the claim and the
   * finished record.
   */
  finished(
    store: IdempotencyStore,
    k: string,
    state: 'completed' | 'failed',
  ): Promise<{ owner: ClaimInput; record: IdempotencyRecord }>;
  /**
   * A fresh key acquired with the short lease (`LEASE`), then the clock moved past it
   * (`ms(150)`): its owner is stale. Returns the key, the owner's claim and the acquired record.
   */
  staleOwner(
    store: IdempotencyStore,
    clock: TestClock,
  ): Promise<{ k: string; owner: ClaimInput; record: IdempotencyRecord }>;
  /** A takeover of `k` from `staleToken` by a fresh token, with a long lease and TTL. */
  takeoverInput(k: string, staleToken: string, overrides?: Partial<TakeoverInput>): TakeoverInput;
  /** A `staleOwner` whose record was then taken over (`takeover`, required to succeed). */
  takenOver(
    store: IdempotencyStore,
    clock: TestClock,
  ): Promise<{ k: string; owner: ClaimInput; record: IdempotencyRecord; takeover: TakeoverInput }>;
  /** `min(concurrency, 20)` fresh keys, each acquired by its own claim; returns the claims. */
  acquireOwners(store: IdempotencyStore, overrides?: Partial<ClaimInput>): Promise<ClaimInput[]>;
  /**
   * `acquireOwners` with the short lease, the clock moved past it, then for each owner at once
   * `rival(owner)` and a takeover by a fresh token (`takers[i]`). `races[i]`: what the rival
   * answered and whether the takeover succeeded.
   */
  raceTakeovers<T>(
    store: IdempotencyStore,
    clock: TestClock,
    rival: (owner: ClaimInput) => Promise<T>,
  ): Promise<{ owners: ClaimInput[]; takers: string[]; races: Array<[T, boolean]> }>;
}
