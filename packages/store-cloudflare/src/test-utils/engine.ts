/**
 * TEST ONLY: workerd (through miniflare) running `worker.ts`, and an `IdempotencyStore` on the
 * Node side that forwards every method to the real client inside workerd over
 * `mf.dispatchFetch`, so that the conformance suite (a Node test runner) can drive the store
 * where it runs. The transport is not part of the package: a Worker calls the client directly.
 */
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type ClaimInput,
  type ClaimResult,
  type CompleteInput,
  ConfigurationError,
  type IdempotencyRecord,
  type IdempotencyStore,
  InvalidInputError,
  type ListFilter,
  RecordIntegrityError,
  type RecordPage,
  type StatsFilter,
  type StoreCapabilities,
  type StoreStats,
  StoreUnavailableError,
  type TakeoverInput,
} from '@idempotent-tools/core';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import type { DurableObjectStoreOptions } from '../client.js';
import { shardOf } from '../shards.js';
import type { Answer, Command } from './worker.js';

/** The worker's name in miniflare (the raw storage handle names it). */
const WORKER = 'store-cloudflare-test';
const CLASS = 'IdempotencyObject';

/** The test Worker as wrangler would bundle it: workerd's export conditions, `cloudflare:*` left to the runtime. */
export async function bundleWorker(
  entry = join(dirname(fileURLToPath(import.meta.url)), 'worker.ts'),
) {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    external: ['cloudflare:*'],
    target: 'es2022',
    logLevel: 'silent',
  });
  return result.outputFiles[0]?.text ?? '';
}

export interface EngineOptions {
  /** Keep the objects' storage in this folder (survives `dispose` and a new engine on it). */
  persist?: string;
  /** Declare the class with SQLite storage (as `new_sqlite_classes` does). @default true */
  sqlite?: boolean;
  /** The bundled Worker. @default the bundle of `worker.ts` */
  script?: string;
}

export interface Engine {
  mf: Miniflare;
  /** A store on the Node side, forwarding to a client of its own inside workerd. */
  store(options?: DurableObjectStoreOptions): Promise<ProxyStore>;
  /** Rows of the object `name` (`prefix + shard`) answered by `sql`, run inside the object. */
  sql<T extends Record<string, unknown>>(
    name: string,
    sql: string,
    ...params: unknown[]
  ): Promise<T[]>;
  /** The object that holds `key` in `store`. */
  objectOf(store: ProxyStore, key: string): string;
  /** Every row of every shard of `store`, expired ones not yet deleted included. */
  count(store: ProxyStore): Promise<number>;
  /** Reset (evict) the object `name`: its memory is dropped, its storage kept. */
  evict(name: string): Promise<void>;
  dispose(): Promise<void>;
}

export async function startEngine(options: EngineOptions = {}): Promise<Engine> {
  const script = options.script ?? (await bundleWorker());
  const mf = new Miniflare({
    name: WORKER,
    modules: true,
    script,
    // The newest date this workerd knows (miniflare refuses later ones); RPC needs >= 2024-04-03.
    compatibilityDate: '2026-07-30',
    durableObjects: { IDEMPOTENCY: { className: CLASS, useSQLite: options.sqlite ?? true } },
    // The raw SQL handle of the tests (corrupt rows, row counts).
    unsafeInspectDurableObjects: true,
    ...(options.persist === undefined ? {} : { durableObjectsPersist: options.persist }),
  });
  await mf.ready;
  const engine: Engine = {
    mf,
    store: (storeOptions = {}) =>
      ProxyStore.create(mf, { prefix: `t-${randomUUID()}:`, ...storeOptions }),
    sql: async (name, sql, ...params) => {
      const storage = await mf.unsafeGetDurableObjectStorage(WORKER, CLASS, { name });
      return (await storage.exec(sql, ...(params as never[]))) as never;
    },
    objectOf: (store, key) => `${store.prefix}${shardOf(key, store.shards)}`,
    count: async (store) => {
      let total = 0;
      for (let shard = 0; shard < store.shards; shard++) {
        const [row] = await engine.sql<{ n: number }>(
          `${store.prefix}${shard}`,
          'SELECT count(*) AS n FROM idempotency_records',
        );
        total += row?.n ?? 0;
      }
      return total;
    },
    evict: (name) => mf.unsafeEvictDurableObject(WORKER, CLASS, { name }),
    dispose: () => mf.dispose(),
  };
  return engine;
}

/** The error the client threw inside workerd, as its class (rebuilt from its code). */
function rebuild(error: Extract<Answer, { error: unknown }>['error']): Error {
  const { message } = error;
  const key = error.key as string | undefined;
  switch (error.code) {
    case 'invalid_input':
      return new InvalidInputError({ message, key, field: String(error.field) });
    case 'configuration':
      return new ConfigurationError({ message, key, option: String(error.option) });
    case 'record_integrity':
      return new RecordIntegrityError({ message, key, reason: error.reason as 'corrupt' });
    case 'store_unavailable':
      return new StoreUnavailableError({
        message,
        key,
        storeName: error.storeName as string | undefined,
        operation: error.operation as string | undefined,
      });
    default:
      return Object.assign(new Error(message), { name: error.name });
  }
}

/** One command to the test Worker; its answer's value, or its error rebuilt. */
async function send(mf: Miniflare, command: Command): Promise<unknown> {
  const response = await mf.dispatchFetch('http://store.test/', {
    method: 'POST',
    body: JSON.stringify(command),
  });
  const answer = (await response.json()) as Answer;
  if ('error' in answer) throw rebuild(answer.error);
  return 'value' in answer ? answer.value : undefined;
}

/** TEST ONLY: the store inside workerd, seen from Node (see the top of this file). */
export class ProxyStore implements IdempotencyStore {
  readonly specificationVersion = 'v1' as const;
  readonly name: string;
  readonly capabilities: StoreCapabilities;
  readonly prefix: string;
  readonly shards: number;
  readonly #mf: Miniflare;
  readonly #id: string;
  readonly #options: DurableObjectStoreOptions;

  private constructor(
    mf: Miniflare,
    id: string,
    options: DurableObjectStoreOptions,
    identity: { name: string; capabilities: StoreCapabilities },
  ) {
    this.#mf = mf;
    this.#id = id;
    this.#options = options;
    this.name = identity.name;
    this.capabilities = identity.capabilities;
    this.prefix = options.prefix ?? 'idem:';
    this.shards = options.shards ?? 16;
  }

  /** A client inside workerd made with `options` (its option errors thrown here). */
  static async create(mf: Miniflare, options: DurableObjectStoreOptions): Promise<ProxyStore> {
    const id = randomUUID();
    const identity = (await send(mf, { store: id, options, method: 'create' })) as {
      name: string;
      capabilities: StoreCapabilities;
    };
    return new ProxyStore(mf, id, options, identity);
  }

  #send(method: string, args: unknown[] = [], waitId?: string): Promise<unknown> {
    // JSON has no undefined: an argument left out stays out (not null).
    while (args.length > 0 && args.at(-1) === undefined) args = args.slice(0, -1);
    const command: Command = { store: this.#id, options: this.#options, method, args };
    if (waitId !== undefined) command.waitId = waitId;
    return send(this.#mf, command);
  }

  claim(input: ClaimInput) {
    return this.#send('claim', [input]) as Promise<ClaimResult>;
  }
  complete(input: CompleteInput) {
    return this.#send('complete', [input]) as Promise<boolean>;
  }
  release(key: string, token: string) {
    return this.#send('release', [key, token]) as Promise<boolean>;
  }
  renew(key: string, token: string, leaseMs: number) {
    return this.#send('renew', [key, token, leaseMs]) as Promise<boolean>;
  }
  takeover(input: TakeoverInput) {
    return this.#send('takeover', [input]) as Promise<boolean>;
  }
  get(key: string) {
    return this.#send('get', [key]) as Promise<IdempotencyRecord | undefined>;
  }
  purgeExpired() {
    return this.#send('purgeExpired') as Promise<number>;
  }
  list(filter?: ListFilter) {
    return this.#send('list', [filter]) as Promise<RecordPage>;
  }
  stats(filter?: StatsFilter) {
    return this.#send('stats', [filter]) as Promise<StoreStats>;
  }
  close() {
    return this.#send('close') as Promise<void>;
  }

  /** The wait runs in workerd; an abort of `signal` resolves here at once and cancels it there. */
  waitForChange(key: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    const waitId = randomUUID();
    return new Promise((resolve, reject) => {
      const stop = () => {
        resolve();
        this.#send('cancel', [], waitId).catch(() => undefined);
      };
      signal?.addEventListener('abort', stop, { once: true });
      this.#send('waitForChange', [key, timeoutMs], waitId).then(
        () => {
          signal?.removeEventListener('abort', stop);
          resolve();
        },
        (error: unknown) => {
          signal?.removeEventListener('abort', stop);
          reject(error);
        },
      );
    });
  }
}
