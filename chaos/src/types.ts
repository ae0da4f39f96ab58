/**
 * What the soak's processes tell each other: the store a worker opens, the messages between the
 * harness and its workers, the lines the vendors and the workers append to their logs.
 */

/** The durable stores the soak runs against. */
export type StoreKind = 'sqlite' | 'redis' | 'cluster' | 'postgres';
export const STORE_KINDS: readonly StoreKind[] = ['sqlite', 'redis', 'cluster', 'postgres'];

/** How a process opens the store of the engine under test (JSON: it crosses processes). */
export type StoreConfig =
  | { kind: 'sqlite'; path: string }
  | { kind: 'redis'; url: string; prefix: string }
  | { kind: 'cluster'; nodes: { host: string; port: number }[]; prefix: string }
  | { kind: 'postgres'; url: string; table: string };

/**
 * The two vendors: `plain` has no idempotency (every request is an effect; the tool reconciles by
 * asking it), `dedupe` honours `Idempotency-Key` like Stripe (the tool re-executes a stale call).
 */
export type VendorName = 'plain' | 'dedupe';
export const VENDORS: readonly VendorName[] = ['plain', 'dedupe'];

/**
 * Where a targeted freeze stops the holder inside the tool: before the ownership check (a stalled
 * holder: the check must catch it), between the check and the vendor's receipt (the limit no check
 * can close: only a deduping vendor makes it safe), after the vendor replied (the successor must
 * adopt the same outcome).
 */
export type FreezePhase = 'before-check' | 'after-check' | 'after-effect';
export const FREEZE_PHASES: readonly FreezePhase[] = [
  'before-check',
  'after-check',
  'after-effect',
];

/** What the tools need, in every worker and in the checker. */
export interface ToolSettings {
  /** Run id: the turn of every call, so two runs never share a key. */
  runId: string;
  lease: number;
  waitTimeout: number;
  ttl: number;
  /** The tool's request to the vendor times out after this (the vendor's slow replies exceed it). */
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
  /** The file this incarnation appends its journal to. */
  journal: string;
  seed: number;
}

/** Harness -> worker. */
export type ToWorker =
  | {
      type: 'call';
      id: number;
      key: string;
      vendor: VendorName;
      /** After the call returns, call again with the same call (the first reply was "lost"). */
      lostReply: boolean;
      /** Freeze this worker (SIGSTOP itself) at this point of the tool, if the tool runs. */
      freeze?: FreezePhase;
    }
  | { type: 'drain' };

/** The outcome of one `run` as a worker saw it. */
export interface CallReport {
  ok: boolean;
  /** `executed`, `replayed`, `waited`, `reconciled` when ok. */
  outcome?: string;
  /** The vendor's effect id in the returned value. */
  id?: string;
  replayed?: boolean;
  /** The error's `code` (IdempotencyError), else `tool_error`. */
  code?: string;
  message?: string;
}

/** Worker -> harness. */
export type FromWorker =
  | { type: 'ready'; pid: number }
  | { type: 'done'; id: number; key: string; first: CallReport; again?: CallReport }
  | { type: 'frozen'; id: number; key: string; phase: FreezePhase; at: number };

/** One request a vendor received (one line of its log). */
export interface VendorLine {
  vendor: VendorName;
  /** The logical key (one per logical call). */
  key: string;
  /** The id of the effect this request produced or was answered with. */
  id: string;
  /** True when this request was an effect (plain: always; dedupe: a new Idempotency-Key). */
  effect: boolean;
  /** The Idempotency-Key it carried (dedupe vendor). */
  idem?: string;
  worker: string;
  pid: number;
  attempt: string;
  /**
   * When the caller's `run` began (before its claim), the tool attempt started, the request passed
   * its last ownership check (on the wire), and when the vendor got it (ms since the epoch).
   */
  called?: number;
  started: number;
  checked: number;
  received: number;
  /** The vendor held its reply back past the tool's timeout (the tool saw no reply). */
  slow?: boolean;
}

/** One line of a worker's (or the checker's) journal. */
export interface JournalLine {
  at: number;
  worker: string;
  pid: number;
  key: string;
  /** call: a run started; tool: the tool runs; checked; send; reply; frozen; not-owned; result. */
  ev: string;
  attempt?: string;
  callId?: number;
  detail?: string;
}

/** Something the chaos loop did, with when (ms since the epoch). */
export interface ChaosEvent {
  type:
    | 'kill'
    | 'stop'
    | 'targeted-freeze'
    | 'engine-restart'
    | 'worker-exit-unexpected'
    | 'settle-kill';
  worker?: string;
  pid?: number;
  from: number;
  to?: number;
  detail?: string;
}
