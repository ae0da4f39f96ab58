/**
 * One run of the fault checker: a schedule (schedule.ts) executed against one store x driver.
 * Worker processes run the scheduled calls through the library while the harness fires the
 * scheduled faults (SIGKILL and SIGSTOP of holders, targeted freezes inside the tool, a TCP proxy
 * that delays, drops or blackholes each direction, store outages and restarts, store-clock and
 * worker-clock steps, vendors that commit late or reply slowly). Every effect is a request to an
 * independent vendor process that logs it. Then the run settles: faults healed, workers drained,
 * a checker calls every key once more, and the history checker (analyze.ts) holds the vendors'
 * logs against what every caller was told and what the store holds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createApprovals,
  createIdempotency,
  type IdempotencyRecord,
  withLocalCache,
} from '@idempotent-tools/core';
import { idempotentHandler } from '@idempotent-tools/core/http';
import { analyze, type KeyRun, type RunResult } from './analyze.ts';
import { type Engine, startEngine } from './engines.ts';
import { mutatedCore, mutationNamed } from './mutations.ts';
import { createRandom } from './random.ts';
import { openStore } from './stores.ts';
import { createTools, httpKey } from './tools.ts';
import {
  type CallReport,
  type ChaosEvent,
  type Fault,
  type FromWorker,
  type JournalLine,
  type PlannedKey,
  type Schedule,
  type StoreConfig,
  type ToolSettings,
  type ToWorker,
  VENDORS,
  type VendorLine,
  type VendorName,
  type WorkerSettings,
} from './types.ts';
import type { VendorControl, VendorSettings } from './vendor.ts';

export interface RunOptions {
  schedule: Schedule;
  lease: number;
  waitTimeout: number;
  fetchTimeoutMs: number;
  /** Most calls in flight per worker. */
  inFlight: number;
  /** Retries per key after a failed call (backoff), during the load. */
  maxRetries: number;
  /** How long a crashed engine stays down before it is started again, ms. */
  downMs: number;
  /** Vendor lookups answering 503 (reconcile cannot tell). */
  lookupFailRate: number;
  keep: boolean;
  log: (line: string) => void;
}

export const RUN_DEFAULTS: Omit<RunOptions, 'schedule' | 'log'> = {
  lease: 1_500,
  waitTimeout: 6_000,
  fetchTimeoutMs: 1_000,
  inFlight: 8,
  maxRetries: 6,
  downMs: 300,
  lookupFailRate: 0.05,
  keep: false,
};

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Processes alive; killed if the harness exits mid-run (a stopped one never sees it go). */
const liveChildren = new Set<ChildProcess>();
const liveDirs = new Set<string>();
process.once('exit', () => {
  for (const child of liveChildren) {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

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

/** A child process that sends one message once it is up. */
async function startChild<T>(
  file: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; first: T }> {
  const child = spawn(process.execPath, [here(file)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  const first = await new Promise<T>((resolve, reject) => {
    child.once('message', (m: T) => resolve(m));
    child.once('exit', (code) => reject(new Error(`${file} exited (${code})`)));
  });
  return { child, first };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGCONT');
  child.kill('SIGKILL');
  await exited;
}

interface Vendor {
  name: VendorName;
  url: string;
  log: string;
  control(change: VendorControl): Promise<void>;
  stop(): Promise<void>;
}

async function startVendor(
  name: VendorName,
  dir: string,
  settings: Omit<VendorSettings, 'name' | 'log'>,
): Promise<Vendor> {
  const log = join(dir, `vendor-${name}.ndjson`);
  const { child, first } = await startChild<{ port: number }>('./vendor.ts', {
    CHAOS_VENDOR: JSON.stringify({ ...settings, name, log }),
  });
  const url = `http://127.0.0.1:${first.port}`;
  return {
    name,
    url,
    log,
    control: async (change) => {
      await fetch(`${url}/control`, { method: 'POST', body: JSON.stringify(change) });
    },
    stop: () => stopChild(child),
  };
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
  clockOffset: number;
  stop?: { event: ChaosEvent; timers: NodeJS.Timeout[] } | undefined;
}

interface KeyState extends KeyRun {
  plan: PlannedKey;
  inFlight: number;
  retries: number;
  settled: boolean;
}

interface CallState {
  id: number;
  key: KeyState;
  slot: Slot;
  kind: 'fresh' | 'copy' | 'retry' | 'successor' | 'crash-resume' | 'late' | 'targeted';
  sentAt: number;
}

/** Run one schedule. */
export async function runSchedule(input: Partial<RunOptions> & { schedule: Schedule }) {
  const o: RunOptions = { ...RUN_DEFAULTS, log: () => {}, ...input };
  const s = o.schedule;
  const random = createRandom(s.seed ^ 0x5eed);
  const runId = `chaos-${Date.now().toString(36)}-${s.seed}`;
  const dir = mkdtempSync(join(tmpdir(), `idt-chaos-${s.target.store}-`));
  if (!o.keep) liveDirs.add(dir);
  const events: ChaosEvent[] = [];
  const notes: string[] = [];
  const log = (line: string) => o.log(`[${s.target.store}/${s.target.driver}] ${line}`);
  const mutation = s.mutation === undefined ? undefined : mutationNamed(s.mutation);
  if (s.mutation !== undefined && mutation === undefined) {
    throw new Error(`unknown mutation ${s.mutation}`);
  }
  const core = mutation === undefined ? undefined : mutatedCore(mutation);

  const vendors: Vendor[] = [];
  let engine: Engine | undefined;
  let proxy: ChildProcess | undefined;
  const slots: Slot[] = [];
  try {
    for (const name of VENDORS) {
      vendors.push(
        await startVendor(name, dir, {
          seed: s.seed,
          slowRate: 0,
          slowMs: Math.round(o.fetchTimeoutMs * 1.5),
          lookupFailRate: o.lookupFailRate,
        }),
      );
    }
    const vendorUrl = (name: VendorName) => vendors.find((v) => v.name === name)!.url;
    engine = await startEngine(s.target, dir, { downMs: o.downMs });
    const eng = engine;
    await eng.prepare?.();
    log(`engine up: ${eng.describe}`);
    const workers = eng.singleProcess ? 1 : s.workers;

    // --- proxies: one listener per worker slot and store endpoint ------------------------------
    let proxyPorts: number[][] | undefined;
    if (eng.endpoints.length > 0 && s.faults.some((f) => f.kind === 'proxy')) {
      const listeners = [];
      for (let slot = 0; slot < workers; slot++) {
        for (const e of eng.endpoints) listeners.push({ slot, host: e.host, port: e.port });
      }
      const started = await startChild<{ ports: number[] }>('./proxy-process.ts', {
        CHAOS_PROXY: JSON.stringify({ listeners }),
      });
      proxy = started.child;
      proxyPorts = [];
      for (let slot = 0; slot < workers; slot++) {
        proxyPorts.push(
          started.first.ports.slice(slot * eng.endpoints.length, (slot + 1) * eng.endpoints.length),
        );
      }
    }
    const workerStore = (slot: number): StoreConfig => {
      const config = eng.workerConfig(
        proxyPorts?.[slot]?.map((port) => ({ host: '127.0.0.1', port })),
      );
      return mutation?.wrap === undefined ? config : { ...config, wrap: mutation.wrap };
    };

    const toolSettings: ToolSettings = {
      runId,
      lease: o.lease,
      waitTimeout: o.waitTimeout,
      ttl: 60 * 60 * 1000,
      fetchTimeoutMs: o.fetchTimeoutMs,
      thinkMs: [2, 30],
      vendors: { plain: vendorUrl('plain'), dedupe: vendorUrl('dedupe') },
    };

    const keys = new Map<string, KeyState>();
    for (const plan of s.keys) {
      keys.set(plan.key, {
        key: plan.key,
        config: plan.config,
        plan,
        told: [],
        inFlight: 0,
        retries: 0,
        settled: false,
      });
    }

    let settling = false;
    let callSeq = 0;
    const calls = new Map<number, CallState>();
    const counts = {
      calls: 0,
      crashedCalls: 0,
      successors: 0,
      retries: 0,
      unexpectedExits: 0,
      settleKills: 0,
      skippedFaults: 0,
      outcomes: {} as Record<string, number>,
      fired: {} as Record<string, number>,
    };
    const retryQueue: { key: KeyState; at: number; kind: CallState['kind'] }[] = [];
    const journalOf = (slot: Slot) => join(dir, `journal-${slot.index}-${slot.incarnation}.ndjson`);
    const execArgv = [
      '--import',
      here('./clock-preload.ts'),
      ...(core === undefined ? [] : ['--import', here('./core-hook-register.ts')]),
    ];

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
        store: workerStore(slot.index),
        journal: journalOf(slot),
        seed: s.seed * 1000 + slot.index * 100 + slot.incarnation,
      };
      const child = spawn(process.execPath, [...execArgv, here('./worker.ts')], {
        env: {
          ...process.env,
          CHAOS_WORKER: JSON.stringify(settings),
          ...(core === undefined ? {} : { CHAOS_CORE_DIR: core.dir }),
        },
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      });
      slot.child = child;
      slot.pid = child.pid ?? 0;
      liveChildren.add(child);
      child.stderr?.on('data', (d: Buffer) => {
        slot.stderr = (slot.stderr + d.toString()).slice(-4000);
      });
      child.on('message', (message: FromWorker) => onMessage(slot, child, message));
      child.on('error', () => {});
      child.once('exit', (code, signal) => {
        liveChildren.delete(child);
        onExit(slot, child, code, signal);
      });
    };

    const send = (slot: Slot, message: ToWorker) => {
      slot.child?.send(message, () => {});
    };
    const ready = (slot: Slot) => slot.state === 'ready' && slot.inFlight.size < o.inFlight;
    /** The slot asked for, else the next one that can take a call (never `exclude`). */
    const slotFor = (wanted: number, exclude?: Slot): Slot | undefined => {
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[(wanted + i) % slots.length]!;
        if (slot !== exclude && ready(slot)) return slot;
      }
      return undefined;
    };

    const dispatch = (key: KeyState, slot: Slot, kind: CallState['kind']) => {
      const id = ++callSeq;
      const call: CallState = { id, key, slot, kind, sentAt: Date.now() };
      calls.set(id, call);
      slot.inFlight.add(id);
      key.inFlight++;
      const plan = key.plan;
      send(slot, {
        type: 'call',
        id,
        key: key.key,
        config: key.config,
        lostReply: (kind === 'fresh' || kind === 'copy') && plan.lostReply,
        ...(plan.decision === undefined ? {} : { decision: plan.decision }),
        ...(kind === 'targeted' && plan.freeze !== undefined ? { freeze: plan.freeze } : {}),
      });
      return call;
    };
    const requeue = (key: KeyState, kind: CallState['kind'], delayMs: number) => {
      retryQueue.push({ key, kind, at: Date.now() + delayMs });
    };

    // --- targeted freezes: the holder's worker is left alone until the freeze is over ---------
    const guarded = new Set<Slot>();
    const frozenBy = new Map<Slot, { key: KeyState; thawTimer: NodeJS.Timeout }>();

    const thaw = (slot: Slot) => {
      if (slot.state !== 'frozen' || slot.stop === undefined) return;
      for (const timer of slot.stop.timers) clearTimeout(timer);
      slot.stop.event.to = Date.now();
      slot.child?.kill('SIGCONT');
      slot.stop = undefined;
      slot.state = 'ready';
      const targeted = frozenBy.get(slot);
      if (targeted !== undefined) {
        clearTimeout(targeted.thawTimer);
        frozenBy.delete(slot);
        targeted.key.fired = true;
        counts.fired[`freeze ${targeted.key.plan.freeze}`] =
          (counts.fired[`freeze ${targeted.key.plan.freeze}`] ?? 0) + 1;
      }
    };
    const successor = (key: KeyState, frozen: Slot) => {
      const slot = slotFor(random.int(0, slots.length - 1), frozen);
      if (slot === undefined) {
        setTimeout(() => !settling && successor(key, frozen), 50).unref();
        return;
      }
      counts.successors++;
      dispatch(key, slot, 'successor');
    };

    // --- messages from workers ----------------------------------------------------------------
    const record = (key: KeyState, by: string, report: CallReport, at: number) => {
      counts.calls++;
      const name = report.ok ? (report.outcome ?? 'ok') : (report.code ?? 'error');
      counts.outcomes[name] = (counts.outcomes[name] ?? 0) + 1;
      key.told.push({
        by,
        at,
        startedAt: report.startedAt ?? at,
        ok: report.ok,
        ...(report.id === undefined ? {} : { id: report.id }),
        outcome: report.ok ? (report.outcome ?? '') : (report.code ?? 'error'),
      });
    };
    const onMessage = (slot: Slot, child: ChildProcess, message: FromWorker) => {
      if (slot.child !== child) return;
      if (message.type === 'ready') {
        slot.pid = message.pid;
        slot.state = 'ready';
        if (slot.clockOffset !== 0) send(slot, { type: 'clock', offsetMs: slot.clockOffset });
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
          detail: `${message.phase} ${call?.key.config ?? '?'} ${message.key}`,
        };
        events.push(event);
        slot.stop = { event, timers: [] };
        if (call !== undefined) {
          // Thawed once a successor's call ended; this bound only keeps a broken run going.
          const thawTimer = setTimeout(() => thaw(slot), 8 * o.lease + o.waitTimeout);
          frozenBy.set(slot, { key: call.key, thawTimer });
          successor(call.key, slot);
        }
        for (const id of slot.inFlight) {
          const other = calls.get(id);
          if (other !== undefined && other !== call) successor(other.key, slot);
        }
        return;
      }
      const call = calls.get(message.id);
      if (call === undefined) return;
      const now = Date.now();
      calls.delete(message.id);
      slot.inFlight.delete(message.id);
      const key = call.key;
      key.inFlight--;
      record(key, slot.label, message.first, now);
      if (message.again !== undefined) {
        record(key, slot.label, message.again, now);
        const a = message.again;
        const refused = !a.ok && a.code === 'store_unavailable';
        const sameOutcome =
          a.ok &&
          (message.first.id === undefined
            ? a.outcome === message.first.outcome
            : a.id === message.first.id);
        if (!refused && !sameOutcome) {
          key.lostReplyMismatch = `first ${message.first.outcome} ${message.first.id ?? ''}, again ${a.ok ? `${a.outcome} ${a.id ?? ''}` : `error ${a.code}`}`;
        }
      }
      if (message.first.ok) key.settled = true;
      if (call.kind === 'targeted' && guarded.has(slot)) guarded.delete(slot);
      // A targeted freeze's successor ended: continue the holder.
      for (const [holder, t] of frozenBy) {
        if (t.key === key && holder !== slot) {
          thaw(holder);
          guarded.delete(holder);
        }
      }
      if (!message.first.ok && !settling && key.retries < o.maxRetries) {
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
        log(
          `worker ${slot.label} exited by itself (code ${code}, signal ${signal}): ${slot.stderr.slice(-500)}`,
        );
      }
      if (slot.stop !== undefined) {
        for (const timer of slot.stop.timers) clearTimeout(timer);
        slot.stop.event.to = Date.now();
        slot.stop = undefined;
      }
      const targeted = frozenBy.get(slot);
      if (targeted !== undefined) {
        clearTimeout(targeted.thawTimer);
        frozenBy.delete(slot);
      }
      guarded.delete(slot);
      slot.state = 'exited';
      slot.child = undefined;
      for (const id of slot.inFlight) {
        const call = calls.get(id);
        calls.delete(id);
        if (call === undefined) continue;
        call.key.inFlight--;
        counts.crashedCalls++;
        // The agent resumes the crashed call from another process.
        if (!settling) requeue(call.key, 'crash-resume', random.between(100, 400));
      }
      slot.inFlight.clear();
      if (!settling) setTimeout(() => !settling && startSlot(slot), 20);
    };

    // --- faults ---------------------------------------------------------------------------------
    let engineQueue: Promise<unknown> = Promise.resolve();
    let engineError: unknown;
    const vendorActive = { commit: 0, slow: 0 };
    const openFaults = new Set<number>();
    const fire = (fault: Fault) => {
      const from = Date.now();
      const skip = (why: string) => {
        counts.skippedFaults++;
        events.push({
          type: fault.kind === 'kill' ? 'kill' : 'stop',
          fault: fault.id,
          from,
          to: from,
          detail: `skipped: ${why}`,
        });
      };
      const done = (type: ChaosEvent['type'], extra: Partial<ChaosEvent> = {}) => {
        counts.fired[fault.kind] = (counts.fired[fault.kind] ?? 0) + 1;
        const event: ChaosEvent = { type, fault: fault.id, from, ...extra };
        events.push(event);
        return event;
      };
      switch (fault.kind) {
        case 'kill': {
          const slot = slots[fault.slot % slots.length]!;
          if (guarded.has(slot) || frozenBy.has(slot)) return skip('a targeted freeze runs there');
          if (slot.state === 'exited' || slot.state === 'starting') return skip('not running');
          done('kill', { worker: slot.label, pid: slot.pid, slot: slot.index });
          slot.expectedExit = true;
          slot.child?.kill('SIGKILL');
          return;
        }
        case 'stop': {
          const slot = slots[fault.slot % slots.length]!;
          const others = slots.filter((x) => x !== slot && x.state === 'ready').length;
          if (guarded.has(slot) || frozenBy.has(slot)) return skip('a targeted freeze runs there');
          if (slot.state !== 'ready' || others === 0) return skip('no other worker to take over');
          slot.child?.kill('SIGSTOP');
          slot.state = 'frozen';
          const event = done('stop', { worker: slot.label, pid: slot.pid, slot: slot.index });
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
              setTimeout(() => thaw(slot), fault.ms),
            ],
          };
          return;
        }
        case 'proxy': {
          if (proxy === undefined) return skip('no proxy');
          const event = done('proxy', {
            slot: fault.slot,
            detail: `${fault.mode}${fault.delayMs ? ` ${fault.delayMs} ms` : ''} ${fault.direction} for ${fault.ms} ms, ${fault.slot === 'all' ? 'every worker' : `worker slot ${fault.slot}`}`,
          });
          openFaults.add(fault.id);
          proxy.send({
            type: 'fault',
            id: fault.id,
            slot: fault.slot,
            direction: fault.direction,
            mode: fault.mode,
            delayMs: fault.delayMs ?? 0,
          });
          setTimeout(() => {
            proxy?.send({ type: 'heal', id: fault.id }, () => {});
            event.to = Date.now();
            openFaults.delete(fault.id);
          }, fault.ms);
          return;
        }
        case 'outage':
        case 'restart': {
          const { outage, restart } = eng;
          if ((fault.kind === 'outage' ? outage : restart) === undefined) {
            return skip(`the engine takes no ${fault.kind}`);
          }
          openFaults.add(fault.id);
          engineQueue = engineQueue.then(async () => {
            const at = Date.now();
            try {
              const detail =
                fault.kind === 'outage' ? await outage!(fault.ms, random) : await restart!(random);
              done(fault.kind === 'outage' ? 'outage' : 'engine-restart', {
                detail,
                to: Date.now(),
              }).from = at;
            } catch (error) {
              engineError = error;
            } finally {
              openFaults.delete(fault.id);
            }
          });
          return;
        }
        case 'clock': {
          const apply = (offsetMs: number) => {
            if (fault.target === 'store') eng.setClock?.(offsetMs);
            else {
              const slot = slots[fault.target % slots.length]!;
              slot.clockOffset = offsetMs;
              if (slot.state === 'ready' || slot.state === 'frozen') {
                send(slot, { type: 'clock', offsetMs });
              }
            }
          };
          if (fault.target === 'store' && eng.setClock === undefined) {
            return skip('the engine clock cannot be stepped');
          }
          const event = done('clock', {
            ...(fault.target === 'store' ? {} : { slot: fault.target % slots.length }),
            detail: `${fault.target === 'store' ? 'store' : `worker slot ${fault.target % slots.length}`} clock ${fault.offsetMs > 0 ? '+' : ''}${fault.offsetMs} ms for ${fault.ms} ms`,
          });
          openFaults.add(fault.id);
          apply(fault.offsetMs);
          setTimeout(() => {
            apply(0);
            event.to = Date.now();
            openFaults.delete(fault.id);
          }, fault.ms);
          return;
        }
        case 'vendor': {
          const event = done('vendor', {
            detail:
              fault.mode === 'commit'
                ? `effects commit ${fault.delayMs} ms after receipt, for ${fault.ms} ms`
                : `replies held ${fault.delayMs} ms (past the tool's timeout), for ${fault.ms} ms`,
          });
          openFaults.add(fault.id);
          vendorActive[fault.mode]++;
          const change = (ms: number): VendorControl =>
            fault.mode === 'commit' ? { commitMs: ms } : { holdMs: ms };
          for (const v of vendors) void v.control(change(fault.delayMs)).catch(() => {});
          setTimeout(() => {
            vendorActive[fault.mode]--;
            if (vendorActive[fault.mode] === 0) {
              for (const v of vendors) void v.control(change(0)).catch(() => {});
            }
            event.to = Date.now();
            openFaults.delete(fault.id);
          }, fault.ms);
          return;
        }
      }
    };

    // --- start ----------------------------------------------------------------------------------
    for (let i = 0; i < workers; i++) {
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
        clockOffset: 0,
      };
      slots.push(slot);
      startSlot(slot);
    }
    const readyBy = Date.now() + 60_000;
    while (slots.some((x) => x.state !== 'ready')) {
      if (Date.now() > readyBy) {
        const stuck = slots.find((x) => x.state !== 'ready');
        throw new Error(`worker ${stuck?.label} did not start: ${stuck?.stderr}`);
      }
      await sleep(20);
    }
    log(
      `${workers} workers ready; ${s.keys.length} keys, ${s.faults.length} faults over ${s.loadMs} ms`,
    );

    // --- the timeline ---------------------------------------------------------------------------
    const loadStart = Date.now();
    const pendingKeys = [...s.keys];
    const pendingLate = [...s.late];
    const pendingFaults = [...s.faults];
    const hardCapMs = Math.max(3 * s.loadMs, s.loadMs + 180_000);
    await new Promise<void>((resolve) => {
      const tick = setInterval(() => {
        const now = Date.now();
        const elapsed = now - loadStart;
        if (engineError !== undefined) {
          clearInterval(tick);
          resolve();
          return;
        }
        while (pendingFaults.length > 0 && pendingFaults[0]!.at <= elapsed) {
          fire(pendingFaults.shift()!);
        }
        while (pendingKeys.length > 0 && pendingKeys[0]!.at <= elapsed) {
          const plan = pendingKeys[0]!;
          const key = keys.get(plan.key)!;
          if (plan.freeze !== undefined) {
            // Alone on a worker no other targeted freeze holds, with another worker to succeed it.
            const slot = slotFor(plan.slots[0]!);
            const others = slots.filter((x) => x !== slot && x.state === 'ready').length;
            const targeted = new Set([...guarded, ...frozenBy.keys()]).size;
            if (
              slot === undefined ||
              guarded.has(slot) ||
              frozenBy.has(slot) ||
              others === 0 ||
              targeted >= Math.max(1, slots.length - 2)
            ) {
              break;
            }
            pendingKeys.shift();
            guarded.add(slot);
            dispatch(key, slot, 'targeted');
            continue;
          }
          const chosen: Slot[] = [];
          for (const wanted of plan.slots) {
            const slot = slotFor(wanted, undefined);
            if (slot !== undefined && !chosen.includes(slot)) chosen.push(slot);
          }
          if (chosen.length === 0) break;
          pendingKeys.shift();
          chosen.forEach((slot, i) => {
            dispatch(key, slot, i === 0 ? 'fresh' : 'copy');
          });
        }
        while (pendingLate.length > 0 && pendingLate[0]!.at <= elapsed) {
          const late = pendingLate[0]!;
          const key = keys.get(late.key);
          const slot = slotFor(late.slot);
          if (slot === undefined) break;
          pendingLate.shift();
          if (key !== undefined) dispatch(key, slot, 'late');
        }
        for (let i = 0; i < retryQueue.length; ) {
          const item = retryQueue[i]!;
          if (item.at > now) {
            i++;
            continue;
          }
          const slot = slotFor(random.int(0, slots.length - 1));
          if (slot === undefined) break;
          retryQueue.splice(i, 1);
          dispatch(item.key, slot, item.kind);
        }
        const planDone =
          pendingKeys.length === 0 &&
          pendingLate.length === 0 &&
          pendingFaults.length === 0 &&
          openFaults.size === 0 &&
          frozenBy.size === 0;
        if ((elapsed >= s.loadMs && planDone) || elapsed >= hardCapMs) {
          if (!planDone) {
            notes.push(
              `load stopped at the hard cap of ${hardCapMs / 1000} s: ${pendingKeys.length} keys never sent, ${pendingFaults.length} faults never fired`,
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
      `load done in ${(loadMs / 1000).toFixed(1)} s: ${loadCalls} calls; faults ${JSON.stringify(counts.fired)}`,
    );

    // --- settle ---------------------------------------------------------------------------------
    settling = true;
    await engineQueue;
    if (engineError !== undefined) throw engineError;
    proxy?.send({ type: 'heal-all' }, () => {});
    eng.setClock?.(0);
    for (const slot of slots) {
      slot.clockOffset = 0;
      if (slot.state === 'ready' || slot.state === 'frozen')
        send(slot, { type: 'clock', offsetMs: 0 });
    }
    for (const slot of slots) thaw(slot);
    for (const slot of slots) if (slot.state === 'ready') send(slot, { type: 'drain' });
    const drainBy = Date.now() + o.waitTimeout + 4 * o.lease + 40_000;
    while (slots.some((x) => x.state !== 'exited') && Date.now() < drainBy) await sleep(50);
    for (const slot of slots) {
      if (slot.state === 'exited') continue;
      counts.settleKills++;
      events.push({ type: 'settle-kill', worker: slot.label, pid: slot.pid, from: Date.now() });
      slot.expectedExit = true;
      slot.child?.kill('SIGCONT');
      slot.child?.kill('SIGKILL');
    }
    while (slots.some((x) => x.state !== 'exited')) await sleep(20);
    log(`workers stopped (${counts.settleKills} killed after the drain timeout); checking`);

    // --- the checker: every key once more, against the store, the vendors healthy --------------
    for (const vendor of vendors) {
      await vendor.control({ slowRate: 0, lookupFailRate: 0, commitMs: 0, holdMs: 0 });
    }
    const checkerStore = await openStore(eng.config);
    const options = { lease: o.lease, waitTimeout: o.waitTimeout, ttl: toolSettings.ttl };
    const idempotency = createIdempotency({ store: checkerStore.store, ...options });
    const cached = createIdempotency({ store: withLocalCache(checkerStore.store), ...options });
    const tools = createTools({
      idempotency,
      cached,
      approvals: createApprovals(idempotency, { ttl: toolSettings.ttl }),
      wrapHandler: (handler) =>
        idempotentHandler(handler, {
          idempotency,
          scope: () => 'chaos',
          name: 'chaos.httpHandler',
        }),
      settings: toolSettings,
      worker: 'checker',
      journalPath: join(dir, 'journal-checker.ndjson'),
      random,
    });
    const idemKey = (k: KeyState) =>
      k.config === 'httpHandler'
        ? idempotency.keyOf(
            { toolName: 'chaos.httpHandler', scope: 'chaos', args: {} },
            { businessKey: () => httpKey(runId, k.key) },
          ).key
        : idempotency.keyOf({ toolName: `chaos.${k.config}`, turnId: runId, args: { key: k.key } })
            .key;
    const all = [...keys.values()];
    const get = (k: KeyState) =>
      checkerStore.store.get(idemKey(k)).catch(() => undefined as IdempotencyRecord | undefined);
    const pre = await mapLimit(all, 16, get);
    // PGlite runs in this process (its WASM blocks the event loop): one call at a time.
    const checked = await mapLimit(all, eng.singleProcess ? 1 : 8, async (k) => {
      const r = await tools.call(k.key, k.config, {
        ...(k.plan.decision === undefined ? {} : { decision: k.plan.decision }),
      });
      const cause = (r.error as { cause?: unknown } | undefined)?.cause;
      const { error: _error, ...rest } = r;
      return {
        ...rest,
        ...(cause === undefined ? {} : { cause: String((cause as Error).message ?? cause) }),
      };
    });
    const final = await mapLimit(all, 16, get);
    await checkerStore.close();

    const vendorLines = vendors.flatMap((v) => readLines<VendorLine>(v.log));
    const journal = readdirSync(dir)
      .filter((f) => f.startsWith('journal-'))
      .flatMap((f) => readLines<JournalLine>(join(dir, f)));
    const result: RunResult = analyze({
      schedule: s,
      engine: eng.describe,
      lease: o.lease,
      keys: all.map((k, i) => ({
        ...k,
        idemKey: idemKey(k),
        pre: pre[i],
        final: final[i],
        checker: checked[i]!,
      })),
      vendorLines,
      journal,
      events,
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
      slot.child?.kill('SIGCONT');
      slot.child?.kill('SIGKILL');
    }
    if (proxy !== undefined) await stopChild(proxy);
    for (const vendor of vendors) await vendor.stop().catch(() => {});
    await engine?.stop().catch(() => {});
    core?.remove();
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  }
}

export type { RunResult };
