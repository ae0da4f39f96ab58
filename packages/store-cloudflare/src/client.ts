import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  ConfigurationError,
  checkListFilter,
  checkStatsFilter,
  checkStoreText,
  checkStoreTimeout,
  closestName,
  decodeCursor,
  emptyStats,
  encodeCursor,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  type ListedRecord,
  type ListFilter,
  RecordIntegrityError,
  type RecordPage,
  reasonOf,
  type StatsFilter,
  type StoreCapabilities,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
} from '@idempotent-tools/core';
import { checkWholeNumber } from '@idempotent-tools/core/store-kit';
// A type only: this module loads anywhere (the object's module needs workerd).
import type { IdempotencyObject } from './object.js';
import type { ObjectRpc, Reply } from './protocol.js';
import { shardOf } from './shards.js';

export interface DurableObjectStoreOptions {
  /**
   * How many objects the records are spread over: a key lives in object
   * `idFromName(prefix + shard)`, its shard a hash of the key. One object serves about a
   * thousand small requests a second; more shards carry more load, and make `list`, `stats` and
   * `purgeExpired` (which ask every shard) cost more. Never change it (nor `prefix`) on a store
   * in use: a key would be looked up in another object, where its record is not, and its call
   * could run again.
   * @default 16
   */
  shards?: number;
  /**
   * What the objects' names start with (`prefix + shard`): stores with other prefixes on the
   * same binding use other objects, and never see each other's records.
   * @default 'idem:'
   */
  prefix?: string;
  /**
   * Longest one operation may take, in ms: then it fails with `StoreUnavailableError`. The
   * request may still land later, which every operation allows for (each is safe to send again).
   * @default 5000
   */
  timeoutMs?: number;
}

/** What the Workers runtime lends the client, when it runs there. */
export interface Runtime {
  /** `waitUntil` of `cloudflare:workers`: keeps a cancel sent on abort going past the request. */
  waitUntil?: (promise: Promise<unknown>) => void;
}

const OPTIONS = ['shards', 'prefix', 'timeoutMs'] as const;
const encoder = new TextEncoder();
/**
 * A Durable Object's SQLite row holds at most 2 MB (string, BLOB or row); the rest of a finished
 * row (key, fingerprint, token, meta) stays well under the margin.
 */
const MAX_OUTCOME_BYTES = 2_000_000 - 64 * 1024;
const USAGE =
  'createDurableObjectStore(env.IDEMPOTENCY), with IDEMPOTENCY bound to the class IdempotencyObject in your wrangler config (durable_objects.bindings) and the class exported from your Worker';

/** The cursor of `list`: the shard it stopped in and the last key it returned there. */
interface Cursor {
  s: number;
  k: string | null;
}

/**
 * The store over `IdempotencyObject`s (Cloudflare Durable Objects): each key's record lives in
 * one object (its shard), where each operation is one atomic step; waiters are woken by the
 * object itself, and expired records are deleted by the object's alarm.
 *
 * ```ts
 * const store = createDurableObjectStore(env.IDEMPOTENCY);
 * const idempotency = createIdempotency({ store });
 * ```
 */
export function createStore(
  namespace: DurableObjectNamespace<IdempotencyObject>,
  options: DurableObjectStoreOptions = {},
  runtime: Runtime = {},
): DurableObjectStore {
  return new DurableObjectStore(namespace, options, runtime);
}

export class DurableObjectStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name = 'durable-object';
  /**
   * `notifiesChanges`: the object that holds a key wakes its waiters when it completes,
   * releases or deletes the record, whoever sent the change. `durable`: the object's SQLite
   * storage answers only after the write is stored.
   */
  readonly capabilities: StoreCapabilities = {
    notifiesChanges: true,
    durable: true,
    maxOutcomeBytes: MAX_OUTCOME_BYTES,
  };
  readonly shards: number;
  readonly prefix: string;

  readonly #namespace: DurableObjectNamespace<IdempotencyObject>;
  readonly #timeoutMs: number;
  readonly #waitUntil: Runtime['waitUntil'];
  /** The objects' ids, by shard (an id is no I/O: one per shard serves every request). */
  readonly #ids: unknown[] = [];
  /** The waits in flight, each with the way to end it now (`close` ends them all). */
  readonly #waits = new Set<() => void>();
  #closed = false;

  constructor(
    namespace: DurableObjectNamespace<IdempotencyObject>,
    options: DurableObjectStoreOptions,
    runtime: Runtime,
  ) {
    if (
      namespace == null ||
      typeof (namespace as { idFromName?: unknown }).idFromName !== 'function' ||
      typeof (namespace as { get?: unknown }).get !== 'function'
    ) {
      throw new InvalidInputError({
        field: 'namespace',
        message: `createDurableObjectStore needs a Durable Object namespace binding, got ${describe(namespace)}: ${USAGE}.`,
      });
    }
    if (options === null || typeof options !== 'object') {
      throw new InvalidInputError({
        field: 'options',
        message: `createDurableObjectStore takes an options object as its second argument ({ shards, prefix, timeoutMs }), got ${describe(options)}.`,
      });
    }
    for (const option of Object.keys(options)) {
      if ((OPTIONS as readonly string[]).includes(option)) continue;
      const meant = closestName(option, OPTIONS);
      throw new ConfigurationError({
        option,
        message: `createDurableObjectStore has no option "${option}"${meant === undefined ? '' : ` (did you mean "${meant}"?)`}; it takes ${OPTIONS.join(', ')}.`,
      });
    }
    const { shards = 16, prefix = 'idem:' } = options;
    this.shards = checkWholeNumber('shards', shards, 1, 1024);
    if (typeof prefix !== 'string' || prefix.length > 200 || !prefix.isWellFormed()) {
      throw new InvalidInputError({
        field: 'prefix',
        message: `prefix must be a string of at most 200 characters (the objects are named prefix + shard), got ${describe(prefix)}.`,
      });
    }
    this.prefix = prefix;
    this.#timeoutMs = checkStoreTimeout('createDurableObjectStore', options.timeoutMs);
    this.#namespace = namespace;
    this.#waitUntil = runtime.waitUntil;
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    checkKey(input.key);
    checkStoreText('fingerprint', input.fingerprint);
    checkStoreText('token', input.token);
    checkStoreText('meta.toolName', input.meta?.toolName);
    checkStoreText('meta.scope', input.meta?.scope);
    checkStoreText('meta.turnId', input.meta?.turnId);
    return this.#call('claim', input.key, (object) => object.claim(input));
  }

  async complete(input: CompleteInput): Promise<boolean> {
    checkKey(input.key);
    checkStoreText('outcome', input.outcome);
    const bytes = encoder.encode(input.outcome).length;
    if (bytes > MAX_OUTCOME_BYTES) {
      throw new InvalidInputError({
        field: 'outcome',
        key: input.key,
        message: `The outcome is ${bytes} bytes; a Durable Object's SQLite row holds at most 2 MB, so this store keeps outcomes up to ${MAX_OUTCOME_BYTES} bytes. Set maxResultBytes: ${MAX_OUTCOME_BYTES} (or less) on createIdempotency so a tool's result is checked before it is returned, or return a reference to the data (an R2 object key) instead of the data.`,
      });
    }
    return this.#call('complete', input.key, (object) => object.complete(input));
  }

  async release(key: string, token: string): Promise<boolean> {
    checkKey(key);
    return this.#call('release', key, (object) => object.release(key, token));
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    checkKey(key);
    return this.#call('renew', key, (object) => object.renew(key, token, leaseMs));
  }

  async takeover(input: TakeoverInput): Promise<boolean> {
    checkKey(input.key);
    checkStoreText('token', input.token);
    return this.#call('takeover', input.key, (object) => object.takeover(input));
  }

  async get(key: string): Promise<IdempotencyRecord | undefined> {
    checkKey(key);
    const record = await this.#call('get', key, (object) => object.get(key));
    return record ?? undefined;
  }

  /**
   * Resolves when the object holding `key` completes, releases or deletes its record, or after
   * `timeoutMs`. The object keeps the timer; an abort of `signal` resolves at once and tells the
   * object to drop the wait.
   */
  waitForChange(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || signal?.aborted) return Promise.resolve();
    try {
      checkKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    const shard = shardOf(key, this.shards);
    const waitId = crypto.randomUUID();
    return new Promise((resolve) => {
      let settled = false;
      const settle = () => {
        if (settled) return false;
        settled = true;
        signal?.removeEventListener('abort', stop);
        this.#waits.delete(stop);
        resolve();
        return true;
      };
      // The caller stopped waiting: the object drops the wait (its timer) too.
      const stop = () => {
        if (!settle()) return;
        const cancel = this.#object(shard)
          .cancelWait(waitId)
          .catch(() => undefined);
        try {
          this.#waitUntil?.(cancel);
        } catch {
          // No request to extend (outside one): the cancel goes out on its own.
        }
      };
      this.#waits.add(stop);
      signal?.addEventListener('abort', stop, { once: true });
      // A failed wait resolves too: the caller claims again, and that claim reports the outage.
      deadline(
        this.#object(shard).waitForChange(key, timeoutMs, waitId),
        timeoutMs + this.#timeoutMs,
      ).then(settle, settle);
    });
  }

  /** Delete expired records in every shard now (each object's alarm does it on its own). */
  async purgeExpired(): Promise<number> {
    const counts = await Promise.all(
      this.#every().map((shard) =>
        this.#call('purgeExpired', undefined, (object) => object.purgeExpired(), shard),
      ),
    );
    return counts.reduce((sum, n) => sum + n, 0);
  }

  /**
   * Inspection, admin only: live records without outcomes, shard after shard, in key order
   * within a shard; the cursor names the shard and the last key returned there. A page asks
   * shards in turn until it is full: O(records of the store) per full listing.
   */
  async list(filter?: ListFilter): Promise<RecordPage> {
    const checked = checkListFilter(filter);
    let cursor: Cursor =
      checked.cursor === undefined
        ? { s: 0, k: null }
        : decodeCursor(checked.cursor, this.#toCursor);
    const { cursor: _cursor, limit, ...where } = checked;
    const records: ListedRecord[] = [];
    while (cursor.s < this.shards) {
      const shard = cursor.s;
      const page = await this.#call(
        'list',
        undefined,
        (object) =>
          object.list({
            ...where,
            limit: limit - records.length,
            ...(cursor.k === null ? {} : { after: cursor.k }),
          }),
        shard,
      );
      records.push(...page.records);
      cursor = page.more ? { s: shard, k: page.last } : { s: shard + 1, k: null };
      if (records.length >= limit) break;
    }
    return cursor.s < this.shards ? { records, cursor: encodeCursor(cursor) } : { records };
  }

  /** Inspection, admin only: live records by state, summed over every shard. */
  async stats(filter?: StatsFilter): Promise<StoreStats> {
    const checked = checkStatsFilter(filter);
    const parts = await Promise.all(
      this.#every().map((shard) =>
        this.#call('stats', undefined, (object) => object.stats(checked), shard),
      ),
    );
    const total = emptyStats(0);
    for (const part of parts) {
      total.records += part.records;
      total.inProgress += part.inProgress;
      total.stale += part.stale;
      total.completed += part.completed;
      total.failed += part.failed;
      total.at = Math.max(total.at, part.at);
    }
    return total;
  }

  /** End the waits in flight (and later ones at once). The namespace is yours: nothing else closes. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const stop of [...this.#waits]) stop();
  }

  // ---- internals ----

  /** A stub of shard `shard`'s object: a new one per request (a stub is bound to its request). */
  #object(shard: number): ObjectRpc {
    let id = this.#ids[shard];
    if (id === undefined) {
      id = this.#namespace.idFromName(`${this.prefix}${shard}`);
      this.#ids[shard] = id;
    }
    return this.#namespace.get(id as DurableObjectId) as unknown as ObjectRpc;
  }

  #every(): number[] {
    return Array.from({ length: this.shards }, (_, shard) => shard);
  }

  readonly #toCursor = (value: unknown): Cursor | undefined => {
    const { s, k } = (value ?? {}) as { s?: unknown; k?: unknown };
    return Number.isSafeInteger(s) &&
      (s as number) >= 0 &&
      (s as number) < this.shards &&
      (k === null || typeof k === 'string')
      ? { s: s as number, k }
      : undefined;
  };

  /** One request to the object of `key` (or of `shard`), its answer unwrapped. */
  async #call<T>(
    operation: string,
    key: string | undefined,
    send: (object: ObjectRpc) => Promise<Reply<T>>,
    shard = shardOf(key ?? '', this.shards),
  ): Promise<T> {
    let reply: Reply<T>;
    try {
      reply = await deadline(send(this.#object(shard)), this.#timeoutMs);
    } catch (cause) {
      throw this.#unavailable(operation, key, shard, cause);
    }
    if ('value' in reply) return reply.value;
    if ('corrupt' in reply) throw this.#corrupt(reply.corrupt.key, reply.corrupt.problem, shard);
    if ('misconfigured' in reply) {
      throw new ConfigurationError({
        option: 'new_sqlite_classes',
        key,
        message: `${reply.misconfigured} Nothing ran.`,
      });
    }
    throw this.#unavailable(operation, key, shard, new Error('an answer of unknown shape'));
  }

  /**
   * The row under a record's key is not one this store wrote. The object answered, so this is no
   * outage (never `StoreUnavailableError`, which `onStoreUnavailable: 'fail-open'` would run the
   * tool unguarded on): the call fails, nothing runs, until someone looks at the row.
   */
  #corrupt(key: string, problem: string, shard: number): RecordIntegrityError {
    return new RecordIntegrityError({
      key,
      reason: 'corrupt',
      message: `The Durable Object idempotency store found a row it did not write under key ${JSON.stringify(key)} (object ${JSON.stringify(this.prefix + shard)}, table idempotency_records: ${problem}). It was not replayed and the tool did not run. Delete the row (DELETE FROM idempotency_records WHERE key = ...) in the object, then retry the call; check that nothing else writes to the object's table.`,
    });
  }

  #unavailable(
    operation: string,
    key: string | undefined,
    shard: number,
    cause: unknown,
  ): StoreUnavailableError {
    const flags = (cause ?? {}) as { overloaded?: unknown; retryable?: unknown };
    const reason = reasonOf(cause);
    const hint =
      flags.overloaded === true
        ? `The object is overloaded: spread the keys over more objects (a larger shards option on a new prefix; today ${this.shards}) or retry later.`
        : /does not (implement|exist)|not (exported|found)|no such|unknown class/i.test(reason)
          ? `Check that your Worker exports IdempotencyObject from its main module and that the binding names that class: ${USAGE}. Then retry the same call.`
          : 'Retry the same call (the object may have been reset or moved); every operation is safe to send again.';
    return new StoreUnavailableError({
      key,
      cause,
      storeName: this.name,
      operation,
      message: `The Durable Object idempotency store failed during ${operation} (object ${JSON.stringify(this.prefix + shard)}): ${reason}. Nothing ran. ${hint}`,
    });
  }
}

/**
 * `operation`, or an error when it has not settled within `ms`. A timer per operation, cleared
 * when it settles: in workerd a timer belongs to the request that set it, so core's one timer
 * shared by every operation (`withDeadline`) could end with the first request.
 */
function deadline<T>(operation: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms (timeoutMs)`)), ms);
  });
  return Promise.race([operation, late]).finally(() => clearTimeout(timer));
}

function checkKey(key: unknown): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidInputError({
      field: 'key',
      message: `key must be a non-empty string, got ${JSON.stringify(key)}.`,
    });
  }
  checkStoreText('key', key);
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object')
    return `an object with keys ${Object.keys(value).join(', ') || '(none)'}`;
  return `${typeof value} ${String(value)}`;
}
