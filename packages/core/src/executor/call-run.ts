/**
 * What the executor's parts share: the engine (one per `createIdempotency`: the store, the
 * outcome codec, the event sink, the waiters) and the state of one call (`CallRun`: its key,
 * policy, timings and its one event).
 */

import { IdempotencyError, StoreUnavailableError } from '../errors/index.js';
import type { CallOutcome, EventHandler, IdempotencyEvent } from '../observe/events.js';
import type {
  ClaimInput,
  ClaimResult,
  IdempotencyRecord,
  IdempotencyStore,
} from '../store/store.js';
import type { OutcomeCodec } from './encryption.js';
import { describeError, type OpenedOutcome } from './outcome.js';
import type { ResolvedPolicy } from './policy.js';
import type { Call, ExecutionContext, ToolFunction } from './types.js';

/** Waiters of this executor, by key. */
export interface LocalWaiters {
  /** Wake every waiter of `key` (a call of this executor settled it). */
  wake(key: string): void;
  /** Resolve when `key` is woken or after `timeoutMs`; `cancel` clears the timer. */
  wait(key: string, timeoutMs: number): { done: Promise<void>; cancel(): void };
}

/** The executor's shared parts. */
export interface Engine {
  readonly store: IdempotencyStore;
  readonly codec: OutcomeCodec;
  readonly maxResultBytes: number;
  readonly exposeArgs: boolean;
  readonly onEvent: EventHandler | undefined;
  /** Outcomes opened by this executor, per record object (see `decode`). */
  readonly openedOutcomes: WeakMap<IdempotencyRecord, OpenedOutcome>;
  /** In-process wake-ups of waiters when a call of this executor settles a key. */
  readonly waiters: LocalWaiters;
  /** A claim after a wait, shared by the waiters of one key woken together. */
  reclaim(input: ClaimInput): Promise<ClaimResult>;
  /** The monotonic clock of leases and grace periods (`performance.now`). */
  now(): number;
  /**
   * Claims of this executor that may have landed while nothing ran under them (every attempt
   * to send the claim failed): key -> token. Released in the background; a later call of the
   * key that meets the record releases it at once instead of waiting for it to go stale.
   */
  readonly orphans: Map<string, string>;
  /** When this executor first saw each version of a stale record (its monotonic clock). */
  readonly staleSince: Map<string, number>;
}

/** One call being run: what every step of the state machine reads, and its one event. */
export class CallRun<Args, Result> {
  /** When the call started, ms since the epoch (the event's). */
  readonly startedAt = Date.now();
  /** When the call started on the engine's monotonic clock (its waits are measured on it). */
  readonly startedTick: number;
  /** Time spent waiting for a running duplicate. */
  waitedMs = 0;
  #finished = false;
  /**
   * An in-progress record is kept a whole ttl past its first lease, so that a holder that dies
   * leaves a stale record for the next retry to find (never one that expired with its lease,
   * which would let the retry run the effect again blindly).
   */
  readonly claimTtl: number;
  readonly meta: { toolName: string; scope?: string; turnId?: string };

  constructor(
    readonly engine: Engine,
    readonly call: Call<Args>,
    readonly fn: ToolFunction<Args, Result>,
    readonly policy: ResolvedPolicy<Args, Result>,
    readonly key: string,
    readonly fingerprint: string,
    readonly argsBytes: number,
    /** The tool call this call was made in (a `vendorCall`'s), if any. */
    readonly around?: ExecutionContext,
  ) {
    this.startedTick = engine.now();
    this.claimTtl = policy.ttl + policy.lease;
    const meta: { toolName: string; scope?: string; turnId?: string } = {
      toolName: call.toolName,
    };
    if (call.scope !== undefined) meta.scope = call.scope;
    if (call.turnId !== undefined) meta.turnId = call.turnId;
    this.meta = meta;
  }

  get finished(): boolean {
    return this.#finished;
  }

  /** Whether anyone listens for the call's event (else its fields need not be computed). */
  get observed(): boolean {
    return this.engine.onEvent !== undefined;
  }

  /** Emit the call's one event (later calls do nothing). */
  finish(outcome: CallOutcome, errorCode?: string, resultBytes?: number): void {
    if (this.#finished) return;
    this.#finished = true;
    const { onEvent } = this.engine;
    if (onEvent === undefined) return;
    const endedAt = Date.now();
    const event: IdempotencyEvent = {
      key: this.key,
      toolName: this.call.toolName,
      scope: this.call.scope,
      turnId: this.call.turnId,
      outcome,
      store: this.engine.store.name,
      startedAt: this.startedAt,
      endedAt,
      durationMs: endedAt - this.startedAt,
      argsFingerprint: this.fingerprint,
      argsBytes: this.argsBytes,
    };
    if (this.waitedMs > 0) event.waitedMs = this.waitedMs;
    if (errorCode !== undefined) event.errorCode = errorCode;
    if (resultBytes !== undefined) event.resultBytes = resultBytes;
    if (this.engine.exposeArgs) event.args = this.call.args;
    try {
      onEvent(event);
    } catch {
      // An observer must never break a call.
    }
  }

  /** Emit the event and throw the error. */
  fail(outcome: CallOutcome, error: IdempotencyError, resultBytes?: number): never {
    this.finish(outcome, error.code, resultBytes);
    throw error;
  }

  /** A store operation whose failure is a `StoreUnavailableError` (typed refusals pass). */
  async storeCall<T>(what: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (cause) {
      throw this.storeError(what, cause);
    }
  }

  /** What a store operation's failure `cause` becomes: itself if typed, else `StoreUnavailableError`. */
  storeError(what: string, cause: unknown): unknown {
    if (IdempotencyError.isInstance(cause)) return cause;
    return new StoreUnavailableError({
      key: this.key,
      cause,
      message: `The idempotency store (${this.engine.store.name}) failed during ${what}: ${describeError(cause).message}. The tool did not run; retry the same call later.`,
    });
  }
}
