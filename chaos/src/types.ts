/**
 * What the checker's processes tell each other: the targets (store x driver), the configurations
 * a key runs under, the schedule of calls and faults, the messages between the harness and its
 * workers, the lines the vendors and the workers append to their logs.
 */

/** The engines the checker runs against. */
export type StoreKind = 'sqlite' | 'redis' | 'cluster' | 'postgres' | 'pglite' | 'dynamodb';

/** One store on one client library. */
export interface Target {
  store: StoreKind;
  driver: string;
}

/** Every store x driver the long form runs. */
export const TARGETS: readonly Target[] = [
  { store: 'sqlite', driver: 'node:sqlite' },
  { store: 'sqlite', driver: 'better-sqlite3' },
  { store: 'redis', driver: 'ioredis' },
  { store: 'redis', driver: 'node-redis' },
  { store: 'redis', driver: 'iovalkey' },
  { store: 'cluster', driver: 'ioredis' },
  { store: 'cluster', driver: 'node-redis' },
  { store: 'cluster', driver: 'iovalkey' },
  { store: 'postgres', driver: 'pg' },
  { store: 'postgres', driver: 'postgres.js' },
  { store: 'pglite', driver: 'pglite' },
  { store: 'dynamodb', driver: 'aws-sdk' },
];

export const targetName = (t: Target): string => `${t.store}/${t.driver}`;

export function parseTarget(text: string): Target | undefined {
  const [store, driver] = text.split('/');
  return TARGETS.find((t) => t.store === store && (driver === undefined || t.driver === driver));
}

/**
 * How a key's tool is written and guarded (see tools.ts):
 * - `fetch`: the defaults (no `onToolError`, no reconcile), a plain `fetch` to the plain vendor;
 * - `idempotentFetch`: the key sent with `idempotentFetch` to the plain vendor, nothing declared;
 * - `vendorDedupes`: `idempotentFetch` to the deduping vendor, `vendorDedupes`, `onStale: 'reexecute'`;
 * - `reconcile`: `idempotentFetch` to the plain vendor, `reconcile` asks the vendor;
 * - `localCache`: as `reconcile`, on `withLocalCache(store)`;
 * - `httpHandler`: an HTTP endpoint wrapped by `idempotentHandler`, its handler a plain `fetch`;
 * - `approvals`: `createApprovals`: asked, decided (approve or reject), then run; as `fetch`.
 */
export type ConfigName =
  | 'fetch'
  | 'idempotentFetch'
  | 'vendorDedupes'
  | 'reconcile'
  | 'localCache'
  | 'httpHandler'
  | 'approvals';
export const CONFIGS: readonly ConfigName[] = [
  'fetch',
  'idempotentFetch',
  'vendorDedupes',
  'reconcile',
  'localCache',
  'httpHandler',
  'approvals',
];

/**
 * The two vendors: `plain` has no idempotency (every request is an effect; `GET /lookup`),
 * `dedupe` honours `Idempotency-Key` like Stripe.
 */
export type VendorName = 'plain' | 'dedupe';
export const VENDORS: readonly VendorName[] = ['plain', 'dedupe'];
export const vendorOf = (config: ConfigName): VendorName =>
  config === 'vendorDedupes' ? 'dedupe' : 'plain';

/**
 * Where a targeted freeze stops the holder inside the tool: before its ownership check, between
 * the check and the vendor's receipt (the limit no check closes), after the vendor replied.
 */
export type FreezePhase = 'before-check' | 'after-check' | 'after-effect';
export const FREEZE_PHASES: readonly FreezePhase[] = [
  'before-check',
  'after-check',
  'after-effect',
];

/** Mutations planted to prove the checker can fail (mutations.ts). */
export type MutationName =
  | 'release-after-request'
  | 'no-ownership-check'
  | 'live-as-stale'
  | 'other-key-replayed'
  | 'takeover-on-store-clock';

/** How a process opens the store (JSON: it crosses processes). */
export interface StoreConfig {
  kind: StoreKind;
  driver: string;
  /** sqlite: the file; pglite: the data dir. */
  path?: string;
  /** redis, postgres, dynamodb: where to connect (a proxy's port for workers). */
  host?: string;
  port?: number;
  /** cluster: the nodes (and, for workers, each node's proxy: nat). */
  nodes?: { host: string; port: number }[];
  nat?: Record<string, { host: string; port: number }>;
  prefix?: string;
  table?: string;
  database?: string;
  /** A store-level mutation: the store is wrapped (store-mutations.ts). */
  wrap?: 'live-as-stale' | 'other-key-replayed';
}

/** One planned logical call (a key). */
export interface PlannedKey {
  key: string;
  config: ConfigName;
  /** When it is first sent, ms after the load starts. */
  at: number;
  /** The worker slots it is sent to at once (the first is the caller; more: concurrent copies). */
  slots: number[];
  /** After the call returns, call again (the first reply was "lost"). */
  lostReply: boolean;
  /** approvals: what the decider says. */
  decision?: 'approve' | 'reject';
  /** A targeted freeze of the first caller at this point of the tool. */
  freeze?: FreezePhase;
}

/** A fault, at `at` ms after the load starts. */
export type Fault =
  | { id: number; kind: 'kill'; at: number; slot: number }
  | { id: number; kind: 'stop'; at: number; slot: number; ms: number }
  | {
      id: number;
      kind: 'proxy';
      at: number;
      /** The worker slot whose connections to the store it hits, or every worker. */
      slot: number | 'all';
      /** up: app -> store; down: store -> app (lost replies). */
      direction: 'up' | 'down' | 'both';
      /** delay each chunk; drop: reset the connection when bytes flow; blackhole: hold them. */
      mode: 'delay' | 'drop' | 'blackhole';
      ms: number;
      delayMs?: number;
    }
  | { id: number; kind: 'outage'; at: number; ms: number }
  | { id: number; kind: 'restart'; at: number }
  | {
      id: number;
      kind: 'clock';
      at: number;
      /** The store's own clock (Redis, PostgreSQL) or a worker slot's (SQLite, DynamoDB, PGlite). */
      target: 'store' | number;
      offsetMs: number;
      /** Stepped back after this long. */
      ms: number;
    }
  | {
      id: number;
      kind: 'vendor';
      at: number;
      /** commit: the effect commits `delayMs` after receipt; slow: replies held past the tool's timeout. */
      mode: 'commit' | 'slow';
      delayMs: number;
      ms: number;
    };
export type FaultKind = Fault['kind'];
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill',
  'stop',
  'proxy',
  'outage',
  'restart',
  'clock',
  'vendor',
];

/** A late retry of a key (an agent retrying an old call), at `at`. */
export interface LateCall {
  at: number;
  key: string;
  slot: number;
}

/** Everything a run does, drawn from the seed (schedule.ts); shrinking removes parts of it. */
export interface Schedule {
  seed: number;
  target: Target;
  workers: number;
  /** The load lasts at least this long, ms. */
  loadMs: number;
  keys: PlannedKey[];
  late: LateCall[];
  faults: Fault[];
  mutation?: MutationName;
}

/** What the tools need, in every worker and in the checker. */
export interface ToolSettings {
  /** Run id: the turn of every call, so two runs never share a key. */
  runId: string;
  lease: number;
  waitTimeout: number;
  ttl: number;
  /** The tool's request to the vendor times out after this. */
  fetchTimeoutMs: number;
  /** The tool "thinks" this long (uniform, ms) before it calls the vendor. */
  thinkMs: [number, number];
  vendors: Record<VendorName, string>;
}

/** What a worker process is started with (env `CHAOS_WORKER`, JSON). */
export interface WorkerSettings extends ToolSettings {
  slot: number;
  incarnation: number;
  store: StoreConfig;
  journal: string;
  seed: number;
}

/** Harness -> worker. */
export type ToWorker =
  | {
      type: 'call';
      id: number;
      key: string;
      config: ConfigName;
      lostReply: boolean;
      decision?: 'approve' | 'reject';
      freeze?: FreezePhase;
    }
  | { type: 'clock'; offsetMs: number }
  | { type: 'drain' };

/** The outcome of one call as its caller saw it. */
export interface CallReport {
  ok: boolean;
  /** `executed`, `replayed`, `waited`, `reconciled`, `rejected` (approvals) when ok. */
  outcome?: string;
  /** The vendor's effect id in the returned value. */
  id?: string;
  replayed?: boolean;
  /** The error's `code` (IdempotencyError), an HTTP problem's code, else `tool_error`. */
  code?: string;
  message?: string;
  /** When the call began (the machine's clock). */
  startedAt?: number;
}

/** Worker -> harness. */
export type FromWorker =
  | { type: 'ready'; pid: number }
  | {
      type: 'done';
      id: number;
      key: string;
      first: CallReport;
      again?: CallReport;
      at: number;
    }
  | { type: 'frozen'; id: number; key: string; phase: FreezePhase; at: number };

/** One request a vendor received (one line of its log). */
export interface VendorLine {
  vendor: VendorName;
  key: string;
  /** The id of the effect this request produced or was answered with. */
  id: string;
  /** True when this request was an effect (plain: always; dedupe: a new Idempotency-Key). */
  effect: boolean;
  idem?: string;
  worker: string;
  pid: number;
  attempt: string;
  called?: number;
  started: number;
  checked: number;
  received: number;
  /** When the effect committed (visible to `lookup`). */
  committed: number;
  slow?: boolean;
}

/** One line of a worker's (or the checker's) journal. */
export interface JournalLine {
  at: number;
  worker: string;
  pid: number;
  key: string;
  /** call; tool; not-owned; send; reply; frozen; thawed; reconcile; result. */
  ev: string;
  attempt?: string;
  callId?: number;
  detail?: string;
}

/** Something the harness did, with when (ms since the epoch). */
export interface ChaosEvent {
  type:
    | 'kill'
    | 'stop'
    | 'targeted-freeze'
    | 'engine-restart'
    | 'outage'
    | 'proxy'
    | 'clock'
    | 'vendor'
    | 'worker-exit-unexpected'
    | 'settle-kill';
  fault?: number;
  worker?: string;
  slot?: number | 'all';
  pid?: number;
  from: number;
  to?: number;
  detail?: string;
}
