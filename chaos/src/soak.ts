/**
 * The chaos soak (issue 16): N worker processes run M logical calls through `createIdempotency`
 * against one durable store while a chaos loop SIGKILLs workers, SIGSTOPs them past their lease,
 * freezes them at chosen points of the tool, and crashes the engine. Every effect is a request to
 * an independent vendor process that logs it. Then the run settles: the workers stop, a checker
 * retries every key once more, and the analysis (`analyze.ts`) holds the vendors' logs against
 * the store's records.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createIdempotency, type IdempotencyRecord } from '@idempotent-tools/core';
import { analyze, type KeyPlan, type Seen, type SoakResult } from './analyze.ts';
import { type Engine, startEngine } from './engines.ts';
import { createRandom } from './random.ts';
import { openStore } from './stores.ts';
import { createTools } from './tools.ts';
import {
  type CallReport,
  type ChaosEvent,
  FREEZE_PHASES,
  type FreezePhase,
  type FromWorker,
  type JournalLine,
  type StoreKind,
  type ToolSettings,
  type ToWorker,
  VENDORS,
  type VendorLine,
  type VendorName,
  type WorkerSettings,
} from './types.ts';
import type { VendorSettings } from './vendor.ts';

export interface SoakOptions {
  store: StoreKind;
  /** Worker processes. */
  workers: number;
  /** Logical calls (keys). */
  keys: number;
  /** Least duration of the load, s (it goes on until every key was sent and every planned fault fired). */
  seconds: number;
  /** Most calls in flight per worker. */
  inFlight: number;
  /** New keys sent per second; 0: as fast as the workers take them. @default keys / (0.75 * seconds) */
  rate?: number;
  lease: number;
  waitTimeout: number;
  /** Share of keys sent to `copies` workers at once. */
  concurrentShare: number;
  copies: number;
  /** Share of keys whose first reply is "lost": the worker calls again after the tool ran. */
  lostReplyShare: number;
  /** Late retries of settled keys, per new key (an agent retrying an old call). */
  lateShare: number;
  /** Mean ms between worker SIGKILLs, SIGSTOPs (random or targeted) and engine restarts. */
  killEveryMs: number;
  stopEveryMs: number;
  restartEveryMs: number;
  /** Share of stops that are targeted freezes (at a point of the tool) rather than random SIGSTOPs. */
  targetedShare: number;
  /** Most workers frozen at once (random stops and targeted freezes). @default max(1, workers / 4) */
  maxFrozen?: number;
  /**
   * The load stops here even when planned keys or faults are left (a failure): the bound of a
   * broken run, not a timing; a loaded machine needs a generous one.
   * @default max(3 * seconds, seconds + 180) s
   */
  hardCapSeconds?: number;
  /** How long a crashed engine stays down before it is started again, ms. */
  downMs: number;
  /** Vendor faults: replies held past the tool's timeout, lookups answered 503. */
  slowReplyRate: number;
  lookupFailRate: number;
  fetchTimeoutMs: number;
  /** Retries per key after a failed call (backoff), during the load. */
  maxRetries: number;
  seed: number;
  /** Keep the temp dir (engine data, vendor logs, journals). */
  keep: boolean;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: Omit<SoakOptions, 'store' | 'log'> = {
  workers: 8,
  keys: 5_000,
  seconds: 60,
  inFlight: 8,
  lease: 1_500,
  waitTimeout: 6_000,
  concurrentShare: 0.1,
  copies: 3,
  lostReplyShare: 0.2,
  lateShare: 0.3,
  killEveryMs: 2_500,
  stopEveryMs: 3_000,
  restartEveryMs: 6_000,
  targetedShare: 0.5,
  downMs: 300,
  slowReplyRate: 0.01,
  lookupFailRate: 0.05,
  fetchTimeoutMs: 1_000,
  maxRetries: 8,
  seed: 16,
  keep: false,
};

/** SQLite has no engine to restart: workers are killed mid-transaction more often instead. */
export function defaultsFor(store: StoreKind): Partial<SoakOptions> {
  return store === 'sqlite' ? { killEveryMs: 800 } : {};
}

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** Worker processes alive; killed if the harness exits mid-run (a stopped one never sees it go). */
const liveWorkers = new Set<ChildProcess>();
/** Temp dirs of runs in progress (not `keep`), removed if the harness exits mid-run. */
const liveDirs = new Set<string>();
process.once('exit', () => {
  for (const child of liveWorkers) child.kill('SIGKILL');
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>) {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

function readLines<T>(file: string): T[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const lines: T[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      lines.push(JSON.parse(line) as T);
    } catch {
      // a line cut by a SIGKILL mid-write
    }
  }
  return lines;
}

interface Vendor {
  name: VendorName;
  url: string;
  log: string;
  control(change: { slowRate?: number; lookupFailRate?: number }): Promise<void>;
  stop(): Promise<void>;
}

async function startVendor(
  name: VendorName,
  dir: string,
  settings: Omit<VendorSettings, 'name' | 'log'>,
): Promise<Vendor> {
  const log = join(dir, `vendor-${name}.ndjson`);
  const child = spawn(process.execPath, [here('./vendor.ts')], {
    env: { ...process.env, CHAOS_VENDOR: JSON.stringify({ ...settings, name, log }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve(m.port));
    child.once('exit', (code) => reject(new Error(`vendor ${name} exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    name,
    url,
    log,
    control: async (change) => {
      await fetch(`${url}/control`, { method: 'POST', body: JSON.stringify(change) });
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

interface KeyState extends KeyPlan {
  settled: boolean;
  inFlight: number;
  retries: number;
  seen: Seen[];
}

interface Slot {
  index: number;
  incarnation: number;
  label: string;
  child: ChildProcess | undefined;
  pid: number;
  state: 'starting' | 'ready' | 'frozen' | 'exited';
  inFlight: Set<number>;
  expectedExit: boolean;
  stderr: string;
  /** The open stop / freeze of this slot. */
  stop?: { event: ChaosEvent; timers: NodeJS.Timeout[] } | undefined;
}

interface CallState {
  id: number;
  key: KeyState;
  slot: Slot;
  kind: 'fresh' | 'copy' | 'retry' | 'successor' | 'crash-resume' | 'late' | 'targeted';
  freeze?: FreezePhase;
}

interface Targeted {
  phase: FreezePhase;
  vendor: VendorName;
  key: KeyState;
  state: 'armed' | 'dispatched' | 'frozen';
  /** Not sent before this (ms since the epoch): a re-armed freeze waits out a store outage. */
  notBefore: number;
  callId?: number;
  slot?: Slot;
}

/** Run the soak on one store. */
export async function runSoak(
  input: Partial<SoakOptions> & { store: StoreKind },
): Promise<SoakResult> {
  const o: SoakOptions = {
    ...DEFAULT_OPTIONS,
    ...defaultsFor(input.store),
    log: () => {},
    ...input,
  };
  const rate = o.rate ?? o.keys / (0.75 * o.seconds);
  const maxFrozen = Math.min(o.workers - 1, o.maxFrozen ?? Math.max(1, Math.floor(o.workers / 4)));
  const random = createRandom(o.seed);
  const runId = `soak-${Date.now().toString(36)}-${o.seed}`;
  const dir = mkdtempSync(join(tmpdir(), `idt-chaos-${o.store}-`));
  if (!o.keep) liveDirs.add(dir);
  const events: ChaosEvent[] = [];
  const notes: string[] = [];
  const log = (line: string) => o.log(`[${o.store}] ${line}`);

  const vendorSettings = {
    seed: o.seed,
    slowRate: o.slowReplyRate,
    slowMs: Math.round(o.fetchTimeoutMs * 1.5),
    lookupFailRate: o.lookupFailRate,
  };
  const vendors: Vendor[] = [];
  let engine: Engine | undefined;
  const slots: Slot[] = [];
  try {
    for (const name of VENDORS) vendors.push(await startVendor(name, dir, vendorSettings));
    const vendorUrl = (name: VendorName) => vendors.find((v) => v.name === name)!.url;
    engine = await startEngine(o.store, dir, { downMs: o.downMs });
    const engineNow = engine;
    log(`engine up: ${engine.describe}`);
    if (engine.config.kind === 'postgres') {
      const setup = await openStore(engine.config);
      await (setup.store as unknown as { ensureSchema(): Promise<void> }).ensureSchema();
      await setup.close();
    }
    const toolSettings: ToolSettings = {
      runId,
      lease: o.lease,
      waitTimeout: o.waitTimeout,
      ttl: 60 * 60 * 1000,
      fetchTimeoutMs: o.fetchTimeoutMs,
      thinkMs: [2, 30],
      vendors: { plain: vendorUrl('plain'), dedupe: vendorUrl('dedupe') },
    };

    // The keys: M planned calls, then one extra key per targeted freeze.
    const keys: KeyState[] = [];
    const newKey = (key: string, vendor: VendorName, extra: Partial<KeyPlan> = {}): KeyState => {
      const state: KeyState = {
        key,
        vendor,
        concurrent: false,
        lostReply: false,
        ...extra,
        settled: false,
        inFlight: 0,
        retries: 0,
        seen: [],
      };
      keys.push(state);
      return state;
    };
    const width = String(o.keys).length;
    for (let i = 0; i < o.keys; i++) {
      newKey(`k${String(i).padStart(width, '0')}`, i % 2 === 0 ? 'plain' : 'dedupe', {
        concurrent: random.chance(o.concurrentShare),
        lostReply: random.chance(o.lostReplyShare),
      });
    }
    const planned = keys.slice();

    let settling = false;
    let loading = true;
    let callSeq = 0;
    const calls = new Map<number, CallState>();
    const counts = {
      calls: 0,
      kills: 0,
      stops: 0,
      targetedFreezes: 0,
      restarts: 0,
      crashedCalls: 0,
      successors: 0,
      retries: 0,
      lateRetries: 0,
      unexpectedExits: 0,
      settleKills: 0,
      outcomes: {} as Record<string, number>,
      targetedFired: {} as Record<string, number>,
    };
    const retryQueue: { key: KeyState; at: number; kind: CallState['kind'] }[] = [];

    const journalOf = (slot: Slot) => join(dir, `journal-${slot.index}-${slot.incarnation}.ndjson`);

    const startSlot = (slot: Slot) => {
      slot.incarnation++;
      slot.label = `w${slot.index}.${slot.incarnation}`;
      slot.state = 'starting';
      slot.expectedExit = false;
      slot.stderr = '';
      slot.inFlight = new Set();
      const settings: WorkerSettings = {
        ...toolSettings,
        slot: slot.index,
        incarnation: slot.incarnation,
        store: engineNow.config,
        journal: journalOf(slot),
        seed: o.seed * 1000 + slot.index * 100 + slot.incarnation,
      };
      const child = spawn(process.execPath, [here('./worker.ts')], {
        env: { ...process.env, CHAOS_WORKER: JSON.stringify(settings) },
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      });
      slot.child = child;
      slot.pid = child.pid ?? 0;
      liveWorkers.add(child);
      child.stderr?.on('data', (d: Buffer) => {
        slot.stderr = (slot.stderr + d.toString()).slice(-4000);
      });
      child.on('message', (message: FromWorker) => onMessage(slot, child, message));
      child.on('error', () => {});
      child.once('exit', (code, signal) => {
        liveWorkers.delete(child);
        onExit(slot, child, code, signal);
      });
    };

    const send = (slot: Slot, message: ToWorker) => {
      // A worker that just died: its exit handler resumes its calls.
      slot.child?.send(message, () => {});
    };

    const available = (exclude?: Slot) =>
      slots.filter((s) => s.state === 'ready' && s !== exclude && s.inFlight.size < o.inFlight);
    const pickSlots = (n: number, exclude?: Slot): Slot[] => {
      const free = available(exclude).sort(
        (a, b) => a.inFlight.size - b.inFlight.size || random.next() - 0.5,
      );
      return free.slice(0, n);
    };

    const dispatch = (key: KeyState, slot: Slot, kind: CallState['kind'], freeze?: FreezePhase) => {
      const id = ++callSeq;
      const call: CallState = { id, key, slot, kind, ...(freeze === undefined ? {} : { freeze }) };
      calls.set(id, call);
      slot.inFlight.add(id);
      key.inFlight++;
      send(slot, {
        type: 'call',
        id,
        key: key.key,
        vendor: key.vendor,
        lostReply: (kind === 'fresh' || kind === 'copy') && key.lostReply,
        ...(freeze === undefined ? {} : { freeze }),
      });
      return call;
    };

    const requeue = (key: KeyState, kind: CallState['kind'], delayMs: number) => {
      retryQueue.push({ key, kind, at: Date.now() + delayMs });
    };

    // --- targeted freezes ---------------------------------------------------------------------
    // Every (phase, vendor) at least once per run, then more as the chaos loop draws them.
    const targetedPlan: { phase: FreezePhase; vendor: VendorName }[] = [];
    for (const phase of FREEZE_PHASES) {
      for (const vendor of VENDORS) targetedPlan.push({ phase, vendor });
    }
    const active: Targeted[] = [];
    let targetedSeq = 0;
    /**
     * Targeted calls until they end: their worker is neither killed nor stopped meanwhile (a kill
     * right after the thaw would take the holder's request back and blur what the freeze shows).
     */
    const guardedCalls = new Set<number>();
    const guarded = (slot: Slot) => [...slot.inFlight].some((id) => guardedCalls.has(id));
    const frozenCount = () => slots.filter((s) => s.state === 'frozen').length;
    const armNext = (notBefore = 0) => {
      while (!settling && targetedPlan.length > 0 && active.length < maxFrozen) {
        const { phase, vendor } = targetedPlan.shift()!;
        const key = newKey(`t${++targetedSeq}-${phase}-${vendor}`, vendor, { targeted: phase });
        active.push({ phase, vendor, key, state: 'armed', notBefore });
      }
    };
    const rearm = (t: Targeted) => {
      active.splice(active.indexOf(t), 1);
      // A new key: the old one may have run (the freeze must meet a tool that runs).
      targetedPlan.unshift({ phase: t.phase, vendor: t.vendor });
      armNext(Date.now() + 500);
    };

    // --- stops and thaws ----------------------------------------------------------------------
    const successor = (key: KeyState, frozen: Slot) => {
      // Not on a worker about to freeze for another targeted key.
      const hosts = new Set(active.map((t) => t.slot));
      const [slot] = pickSlots(o.workers, frozen).filter((s) => !hosts.has(s));
      if (slot === undefined) {
        setTimeout(() => !settling && successor(key, frozen), 50).unref();
        return;
      }
      counts.successors++;
      const call = dispatch(key, slot, 'successor');
      // The successor of a targeted freeze is left alone too (no kill, stop or other freeze on
      // its worker), so that what the vendor sees for the key is that freeze's doing alone.
      if (active.some((t) => t.key === key)) guardedCalls.add(call.id);
    };
    const thaw = (slot: Slot) => {
      if (slot.state !== 'frozen' || slot.stop === undefined) return;
      for (const timer of slot.stop.timers) clearTimeout(timer);
      // Stamped before the signal: the worker's own stamps after it are all later.
      slot.stop.event.to = Date.now();
      slot.child?.kill('SIGCONT');
      slot.stop = undefined;
      slot.state = 'ready';
      const t = active.find((t) => t.slot === slot && t.state === 'frozen');
      if (t !== undefined) {
        const name = `${t.phase}/${t.vendor}`;
        counts.targetedFired[name] = (counts.targetedFired[name] ?? 0) + 1;
        t.key.fired = true;
        active.splice(active.indexOf(t), 1);
        armNext();
      }
    };
    const randomStop = () => {
      const hosts = new Set(active.map((t) => t.slot));
      const ready = slots.filter((s) => s.state === 'ready' && !hosts.has(s) && !guarded(s));
      const busy = ready.filter((s) => s.inFlight.size > 0);
      const candidates = busy.length > 0 ? busy : ready;
      if (candidates.length === 0 || slots.filter((s) => s.state === 'ready').length < 2) return;
      const slot = random.pick(candidates);
      slot.child?.kill('SIGSTOP');
      const event: ChaosEvent = {
        type: 'stop',
        worker: slot.label,
        pid: slot.pid,
        from: Date.now(),
      };
      events.push(event);
      counts.stops++;
      slot.state = 'frozen';
      const freezeMs = random.between(o.lease * 1.5, o.lease * 3);
      slot.stop = {
        event,
        timers: [
          // The callers give up on the frozen worker and retry elsewhere.
          setTimeout(
            () => {
              for (const id of slot.inFlight) {
                const call = calls.get(id);
                if (call !== undefined) successor(call.key, slot);
              }
            },
            random.between(o.lease * 0.3, o.lease),
          ),
          setTimeout(() => thaw(slot), freezeMs),
        ],
      };
    };

    // --- messages from workers ----------------------------------------------------------------
    const record = (key: KeyState, by: string, report: CallReport) => {
      counts.calls++;
      const name = report.ok ? (report.outcome ?? 'ok') : (report.code ?? 'error');
      counts.outcomes[name] = (counts.outcomes[name] ?? 0) + 1;
      if (report.ok && report.id !== undefined) {
        key.seen.push({ by, id: report.id, outcome: report.outcome ?? '' });
      }
    };
    const onMessage = (slot: Slot, child: ChildProcess, message: FromWorker) => {
      if (slot.child !== child) return;
      if (message.type === 'ready') {
        slot.pid = message.pid;
        slot.state = 'ready';
        if (settling) send(slot, { type: 'drain' });
        return;
      }
      if (message.type === 'frozen') {
        const call = calls.get(message.id);
        slot.state = 'frozen';
        const event: ChaosEvent = {
          type: 'targeted-freeze',
          worker: slot.label,
          pid: slot.pid,
          from: message.at,
          detail: `${message.phase} ${call?.key.vendor ?? '?'} ${message.key}`,
        };
        events.push(event);
        counts.targetedFreezes++;
        const t = active.find((t) => t.callId === message.id);
        if (t !== undefined) {
          t.state = 'frozen';
          t.slot = slot;
        }
        slot.stop = {
          event,
          // Thawed once a successor settled the key (successors are sent until one does); this
          // bound only keeps a broken run from hanging: the settle thaws every worker anyway.
          timers: [setTimeout(() => thaw(slot), 120_000)],
        };
        for (const id of slot.inFlight) {
          const other = calls.get(id);
          if (other !== undefined) successor(other.key, slot);
        }
        return;
      }
      const call = calls.get(message.id);
      if (call === undefined) return;
      guardedCalls.delete(message.id);
      calls.delete(message.id);
      slot.inFlight.delete(message.id);
      const key = call.key;
      key.inFlight--;
      record(key, slot.label, message.first);
      if (message.again !== undefined) {
        record(key, slot.label, message.again);
        const a = message.again;
        // The first call settled the key: the same call again must replay it, or be refused
        // before anything runs (the store is down); anything else ran the tool again or lost it.
        const refused = !a.ok && a.code === 'store_unavailable';
        if (!refused && (!a.ok || a.replayed !== true || a.id !== message.first.id)) {
          key.lostReplyMismatch = `first ${message.first.outcome} ${message.first.id}, again ${a.ok ? `${a.outcome} ${a.id}` : `error ${a.code}`}`;
        }
      }
      if (message.first.ok) key.settled = true;
      // The targeted freeze: thaw the holder once its successor settled the key.
      const t = active.find((t) => t.key === key);
      if (t !== undefined) {
        if (t.state === 'frozen' && call.id !== t.callId && t.slot !== undefined) {
          const holder = t.slot;
          if (message.first.ok) thaw(holder);
          else if (!settling)
            setTimeout(() => holder.state === 'frozen' && successor(key, holder), 200);
          return;
        }
        if (t.state === 'dispatched' && call.id === t.callId) {
          // It ended without reaching the freeze (a store error before the tool): again.
          rearm(t);
          return;
        }
      }
      if (!message.first.ok && loading && !settling && key.retries < o.maxRetries) {
        key.retries++;
        counts.retries++;
        requeue(key, 'retry', random.between(100, 300) * key.retries);
      }
    };
    const onExit = (
      slot: Slot,
      child: ChildProcess,
      code: number | null,
      signal: NodeJS.Signals | null,
    ) => {
      if (slot.child !== child) return;
      if (!slot.expectedExit && !(settling && code === 0)) {
        counts.unexpectedExits++;
        events.push({
          type: 'worker-exit-unexpected',
          worker: slot.label,
          pid: slot.pid,
          from: Date.now(),
          detail: `code ${code} signal ${signal}: ${slot.stderr.slice(-1500)}`,
        });
        log(`worker ${slot.label} exited by itself (code ${code}, signal ${signal})`);
      }
      if (slot.stop !== undefined) {
        for (const timer of slot.stop.timers) clearTimeout(timer);
        slot.stop.event.to = Date.now();
        slot.stop = undefined;
      }
      slot.state = 'exited';
      slot.child = undefined;
      for (const id of slot.inFlight) {
        const call = calls.get(id);
        calls.delete(id);
        guardedCalls.delete(id);
        if (call === undefined) continue;
        call.key.inFlight--;
        counts.crashedCalls++;
        const t = active.find((t) => t.callId === id && t.state === 'dispatched');
        if (t !== undefined) {
          rearm(t);
          continue;
        }
        // The agent resumes the crashed call (crash-resume) from another process.
        if (!settling) requeue(call.key, 'crash-resume', random.between(100, 400));
      }
      slot.inFlight.clear();
      for (const t of active.filter((t) => t.slot === slot && t.state === 'frozen')) rearm(t);
      if (!settling) setTimeout(() => !settling && startSlot(slot), 20);
    };

    const kill = () => {
      const ready = slots.filter((s) => s.state === 'ready' && !guarded(s));
      const busy = ready.filter((s) => s.inFlight.size > 0);
      const candidates = busy.length > 0 ? busy : ready;
      if (candidates.length === 0) return;
      const slot = random.pick(candidates);
      slot.expectedExit = true;
      events.push({ type: 'kill', worker: slot.label, pid: slot.pid, from: Date.now() });
      counts.kills++;
      slot.child?.kill('SIGKILL');
    };

    // --- start ----------------------------------------------------------------------------------
    for (let i = 0; i < o.workers; i++) {
      const slot: Slot = {
        index: i,
        incarnation: 0,
        label: '',
        child: undefined,
        pid: 0,
        state: 'exited',
        inFlight: new Set(),
        expectedExit: false,
        stderr: '',
      };
      slots.push(slot);
      startSlot(slot);
    }
    const readyBy = Date.now() + 60_000;
    while (slots.some((s) => s.state !== 'ready')) {
      if (Date.now() > readyBy) {
        const stuck = slots.find((s) => s.state !== 'ready');
        throw new Error(`worker ${stuck?.label} did not start: ${stuck?.stderr}`);
      }
      await sleep(20);
    }
    log(`${o.workers} workers ready; load for >= ${o.seconds} s at ${rate.toFixed(0)} new keys/s`);

    // --- chaos loop -----------------------------------------------------------------------------
    const timers: NodeJS.Timeout[] = [];
    const every = (meanMs: number, action: () => unknown) => {
      const schedule = () => {
        const timer = setTimeout(
          async () => {
            if (settling) return;
            await action();
            schedule();
          },
          random.between(meanMs * 0.5, meanMs * 1.5),
        );
        timers.push(timer);
      };
      schedule();
    };
    let restarting: Promise<void> | undefined;
    let engineError: unknown;
    every(o.killEveryMs, kill);
    every(o.stopEveryMs, () => {
      if (frozenCount() + active.length >= maxFrozen) return;
      if (random.chance(o.targetedShare)) {
        targetedPlan.push({ phase: random.pick(FREEZE_PHASES), vendor: random.pick(VENDORS) });
        armNext();
      } else {
        randomStop();
      }
    });
    const restartEngine = engine.restart;
    if (restartEngine !== undefined) {
      every(o.restartEveryMs, async () => {
        const from = Date.now();
        restarting = restartEngine(random).then(
          (detail) => {
            events.push({ type: 'engine-restart', from, to: Date.now(), detail });
            counts.restarts++;
          },
          (error: unknown) => {
            engineError = error;
          },
        );
        await restarting;
        restarting = undefined;
      });
    }
    armNext();

    // --- load -----------------------------------------------------------------------------------
    const loadStart = Date.now();
    let nextFresh = 0;
    let lateSent = 0;
    const hardCapMs = (o.hardCapSeconds ?? Math.max(3 * o.seconds, o.seconds + 180)) * 1000;
    await new Promise<void>((resolve) => {
      const tick = setInterval(() => {
        const now = Date.now();
        const elapsed = now - loadStart;
        if (engineError !== undefined) {
          clearInterval(tick);
          resolve();
          return;
        }
        // Targeted freeze: its key goes out at once, alone, with the freeze.
        for (const t of active) {
          if (t.state !== 'armed' || t.notBefore > now) continue;
          // Never two freezes on one worker, and always a worker left for the successors.
          const hosts = new Set(active.map((a) => a.slot).filter((s) => s !== undefined));
          const [slot] = pickSlots(o.workers).filter((s) => !hosts.has(s) && !guarded(s));
          if (slot === undefined || frozenCount() >= maxFrozen) break;
          const call = dispatch(t.key, slot, 'targeted', t.phase);
          guardedCalls.add(call.id);
          t.state = 'dispatched';
          t.callId = call.id;
          t.slot = slot;
        }
        // Retries (failed calls, crash-resumes) whose backoff passed.
        for (let i = 0; i < retryQueue.length; ) {
          const item = retryQueue[i]!;
          if (item.at > now) {
            i++;
            continue;
          }
          const [slot] = pickSlots(1);
          if (slot === undefined) break;
          retryQueue.splice(i, 1);
          dispatch(item.key, slot, item.kind);
        }
        // New keys, paced.
        const due = rate > 0 ? Math.floor((rate * elapsed) / 1000) : Number.POSITIVE_INFINITY;
        while (nextFresh < planned.length && nextFresh < due) {
          const key = planned[nextFresh]!;
          const chosen = pickSlots(key.concurrent ? o.copies : 1);
          if (chosen.length === 0) break;
          chosen.forEach((slot, i) => {
            dispatch(key, slot, i === 0 ? 'fresh' : 'copy');
          });
          nextFresh++;
        }
        // Late retries of settled keys (an agent retrying an old call), for the whole load.
        const lateDue = Math.floor(
          rate > 0 ? (rate * o.lateShare * elapsed) / 1000 : nextFresh * o.lateShare,
        );
        while (lateSent < lateDue) {
          const settled = planned.slice(0, nextFresh).filter((k) => k.settled);
          if (settled.length === 0) break;
          const [slot] = pickSlots(1);
          if (slot === undefined) break;
          dispatch(random.pick(settled), slot, 'late');
          lateSent++;
          counts.lateRetries++;
        }
        const planDone = active.length === 0 && targetedPlan.length === 0;
        const chaosDone =
          counts.kills > 0 &&
          counts.stops > 0 &&
          (restartEngine === undefined || counts.restarts > 0);
        if (
          (elapsed >= o.seconds * 1000 && nextFresh >= planned.length && planDone && chaosDone) ||
          elapsed >= hardCapMs
        ) {
          if (elapsed >= hardCapMs) {
            notes.push(
              `load stopped at the hard cap of ${hardCapMs / 1000} s: ${planned.length - nextFresh} keys never sent, targeted freezes left: ${targetedPlan.length + active.length}`,
            );
          }
          clearInterval(tick);
          resolve();
        }
      }, 5);
    });
    const loadMs = Date.now() - loadStart;
    const loadCalls = counts.calls;
    log(
      `load done in ${(loadMs / 1000).toFixed(1)} s: ${loadCalls} calls, ${counts.kills} kills, ${counts.stops} stops, ${counts.targetedFreezes} targeted freezes, ${counts.restarts} engine restarts`,
    );

    // --- settle ---------------------------------------------------------------------------------
    loading = false;
    settling = true;
    for (const timer of timers) clearTimeout(timer);
    if (restarting !== undefined) await restarting;
    if (engineError !== undefined) throw engineError;
    for (const slot of slots) thaw(slot);
    for (const slot of slots) if (slot.state === 'ready') send(slot, { type: 'drain' });
    const drainBy = Date.now() + o.waitTimeout + 4 * o.lease + 10_000;
    while (slots.some((s) => s.state !== 'exited') && Date.now() < drainBy) await sleep(50);
    for (const slot of slots) {
      if (slot.state === 'exited') continue;
      counts.settleKills++;
      events.push({ type: 'settle-kill', worker: slot.label, pid: slot.pid, from: Date.now() });
      slot.expectedExit = true;
      slot.child?.kill('SIGKILL');
    }
    while (slots.some((s) => s.state !== 'exited')) await sleep(20);
    log(`workers stopped (${counts.settleKills} killed after the drain timeout); checking`);

    // --- checker: every key once more, against the store -----------------------------------------
    for (const vendor of vendors) await vendor.control({ slowRate: 0, lookupFailRate: 0 });
    const checkerStore = await openStore(engine.config);
    const idempotency = createIdempotency({
      store: checkerStore.store,
      lease: o.lease,
      waitTimeout: o.waitTimeout,
      ttl: toolSettings.ttl,
    });
    const checkerJournal = join(dir, 'journal-checker.ndjson');
    const tools = createTools({
      idempotency,
      settings: toolSettings,
      worker: 'checker',
      journalPath: checkerJournal,
      random,
    });
    const idemKey = (k: KeyPlan) =>
      idempotency.keyOf({
        toolName: `chaos.${k.vendor}`,
        turnId: runId,
        args: { key: k.key },
      }).key;
    const get = (k: KeyPlan) => checkerStore.store.get(idemKey(k));
    const pre = await mapLimit(keys, 32, get);
    const checker = await mapLimit(keys, 16, async (k) => {
      const r = await tools.call(k.key, k.vendor);
      const cause = (r.error as { cause?: unknown } | undefined)?.cause;
      const { error: _error, ...rest } = r;
      return {
        ...rest,
        ...(cause === undefined ? {} : { cause: String((cause as Error).message ?? cause) }),
      };
    });
    const final = await mapLimit(keys, 32, get);
    await checkerStore.close();

    const vendorLines = vendors.flatMap((v) => readLines<VendorLine>(v.log));
    const journal = readdirSync(dir)
      .filter((f) => f.startsWith('journal-'))
      .flatMap((f) => readLines<JournalLine>(join(dir, f)));
    const byKey = <T>(values: T[]) => new Map(keys.map((k, i) => [k.key, values[i]!]));
    const result = analyze({
      store: o.store,
      engine: engine.describe,
      options: { ...o, rate },
      keys: keys.map((k) => ({ ...k, idemKey: idemKey(k) })),
      vendorLines,
      journal,
      events,
      pre: byKey<IdempotencyRecord | undefined>(pre),
      final: byKey<IdempotencyRecord | undefined>(final),
      checker: byKey(checker),
      loadMs,
      loadCalls,
      counts,
      notes,
      dir: o.keep ? dir : undefined,
    });
    log(
      `verdict: ${result.verdict}${result.failures.length ? ` (${result.failures.join('; ')})` : ''}`,
    );
    return result;
  } finally {
    for (const slot of slots) {
      slot.expectedExit = true;
      slot.child?.kill('SIGKILL');
    }
    for (const vendor of vendors) await vendor.stop().catch(() => {});
    await engine?.stop().catch(() => {});
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  }
}
