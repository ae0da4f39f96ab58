/**
 * The schedule of a run, drawn from its seed: which keys are called when, by which workers, under
 * which configuration, and which faults fire when (types.ts `Schedule`). The same seed, target and
 * sizes give the same schedule; a failure's schedule is shrunk (shrink.ts) by removing parts of it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRandom } from './random.ts';
import {
  CONFIGS,
  type ConfigName,
  type Fault,
  type FaultKind,
  FREEZE_PHASES,
  type MutationName,
  type PlannedKey,
  type Schedule,
  type Target,
} from './types.ts';

export interface ScheduleOptions {
  seed: number;
  target: Target;
  workers: number;
  keys: number;
  loadMs: number;
  lease: number;
  fetchTimeoutMs: number;
  configs: readonly ConfigName[];
  /** The fault kinds the engine takes (engines.ts). */
  faults: ReadonlySet<FaultKind>;
  /** Whose clock a clock fault steps. */
  clock: 'store' | 'workers';
  /** Mean ms between two faults of each kind (0: none of that kind). */
  every: Partial<Record<FaultKind, number>>;
  /** Share of keys sent to 3 workers at once, of keys whose first reply is "lost", late retries per key. */
  concurrentShare: number;
  lostReplyShare: number;
  lateShare: number;
  /** Targeted freezes: each phase for each of these configurations, once. */
  freezeConfigs: readonly ConfigName[];
  mutation?: MutationName;
}

export const DEFAULT_EVERY: Record<FaultKind, number> = {
  kill: 2_500,
  stop: 3_000,
  proxy: 2_000,
  outage: 7_000,
  restart: 8_000,
  clock: 5_000,
  vendor: 4_000,
};

/** Draw the schedule of `o.seed`. */
export function generateSchedule(o: ScheduleOptions): Schedule {
  const random = createRandom(o.seed);
  const width = String(o.keys).length;
  const keys: PlannedKey[] = [];
  const slot = () => random.int(0, o.workers - 1);
  const slotsFor = (copies: number) => {
    const first = slot();
    const out = [first];
    for (let i = 1; i < copies && out.length < o.workers; i++) {
      let s = slot();
      while (out.includes(s)) s = (s + 1) % o.workers;
      out.push(s);
    }
    return out;
  };
  for (let i = 0; i < o.keys; i++) {
    const config = o.configs[i % o.configs.length]!;
    const key: PlannedKey = {
      key: `k${String(i).padStart(width, '0')}`,
      config,
      at: Math.round(random.between(0, o.loadMs * 0.8)),
      slots: slotsFor(random.chance(o.concurrentShare) ? 3 : 1),
      lostReply: random.chance(o.lostReplyShare),
    };
    if (config === 'approvals') key.decision = random.chance(0.8) ? 'approve' : 'reject';
    keys.push(key);
  }
  // Targeted freezes: one key per phase x configuration, alone on its worker.
  if (o.workers >= 2) {
    let n = 0;
    for (const config of o.freezeConfigs) {
      for (const phase of FREEZE_PHASES) {
        keys.push({
          key: `t${++n}-${phase}-${config}`,
          config,
          at: Math.round(random.between(o.loadMs * 0.05, o.loadMs * 0.7)),
          slots: [slot()],
          lostReply: false,
          freeze: phase,
        });
      }
    }
  }
  keys.sort((a, b) => a.at - b.at);
  const late = [];
  const lateCount = Math.round(o.keys * o.lateShare);
  for (let i = 0; i < lateCount; i++) {
    const at = Math.round(random.between(o.loadMs * 0.2, o.loadMs));
    const earlier = keys.filter((k) => k.at < at - 1_000 && k.freeze === undefined);
    if (earlier.length === 0) continue;
    late.push({ at, key: random.pick(earlier).key, slot: slot() });
  }
  late.sort((a, b) => a.at - b.at);

  const faults: Fault[] = [];
  let id = 0;
  const lease = o.lease;
  for (const kind of o.faults) {
    const every = o.every[kind] ?? DEFAULT_EVERY[kind];
    if (every <= 0) continue;
    if ((kind === 'stop' || kind === 'proxy') && o.workers < 2) continue;
    const count = Math.max(1, Math.round(o.loadMs / every));
    for (let i = 0; i < count; i++) {
      const at = Math.round(random.between(o.loadMs * 0.05, o.loadMs * 0.9));
      const ms = (lo: number, hi: number) => Math.round(random.between(lo * lease, hi * lease));
      switch (kind) {
        case 'kill':
          faults.push({ id: ++id, kind, at, slot: slot() });
          break;
        case 'stop':
          faults.push({ id: ++id, kind, at, slot: slot(), ms: ms(1.5, 3) });
          break;
        case 'proxy': {
          const mode = random.pick(['delay', 'drop', 'blackhole'] as const);
          faults.push({
            id: ++id,
            kind,
            at,
            slot: random.chance(0.3) ? 'all' : slot(),
            direction: random.pick(['up', 'down', 'both'] as const),
            mode,
            ms: ms(0.5, 2),
            ...(mode === 'delay' ? { delayMs: Math.round(random.between(50, lease / 2)) } : {}),
          });
          break;
        }
        case 'outage':
          faults.push({ id: ++id, kind, at, ms: ms(0.5, 2.5) });
          break;
        case 'restart':
          faults.push({ id: ++id, kind, at });
          break;
        case 'clock': {
          const sign = random.chance(0.5) ? 1 : -1;
          faults.push({
            id: ++id,
            kind,
            at,
            target: o.clock === 'store' ? 'store' : slot(),
            offsetMs: sign * ms(1, 3),
            ms: ms(1, 3),
          });
          break;
        }
        case 'vendor': {
          const mode = random.pick(['commit', 'slow'] as const);
          faults.push({
            id: ++id,
            kind,
            at,
            mode,
            delayMs: mode === 'commit' ? 300 : Math.round(o.fetchTimeoutMs * 1.5),
            ms: ms(1, 3),
          });
          break;
        }
      }
    }
  }
  faults.sort((a, b) => a.at - b.at);
  return {
    seed: o.seed,
    target: o.target,
    workers: o.workers,
    loadMs: o.loadMs,
    keys,
    late,
    faults,
    ...(o.mutation === undefined ? {} : { mutation: o.mutation }),
  };
}

/** A short description: sizes and fault counts. */
export function describeSchedule(s: Schedule): string {
  const kinds: Record<string, number> = {};
  for (const f of s.faults) kinds[f.kind] = (kinds[f.kind] ?? 0) + 1;
  const faults = Object.entries(kinds)
    .map(([k, n]) => `${n} ${k}`)
    .join(', ');
  return `${s.workers} workers, ${s.keys.length} keys, ${s.late.length} late retries, ${s.faults.length} faults (${faults || 'none'}), load ${(s.loadMs / 1000).toFixed(1)} s`;
}

/** The schedule cut down to `keys` (and their late retries) and `faults`, on `workers` workers. */
export function restrict(
  s: Schedule,
  part: { keys?: Set<string>; faults?: Set<number>; workers?: number },
): Schedule {
  const workers = part.workers ?? s.workers;
  const remap = (slot: number) => slot % workers;
  const keys = s.keys
    .filter((k) => part.keys === undefined || part.keys.has(k.key))
    .map((k) => ({ ...k, slots: [...new Set(k.slots.map(remap))] }));
  const late = s.late
    .filter((l) => part.keys === undefined || part.keys.has(l.key))
    .map((l) => ({ ...l, slot: remap(l.slot) }));
  const faults = s.faults
    .filter((f) => part.faults === undefined || part.faults.has(f.id))
    .filter((f) => workers >= 2 || (f.kind !== 'stop' && f.kind !== 'proxy'))
    .map((f) => {
      if ('slot' in f && typeof f.slot === 'number') return { ...f, slot: remap(f.slot) };
      if (f.kind === 'clock' && typeof f.target === 'number') {
        return { ...f, target: remap(f.target) };
      }
      return f;
    });
  // The load lasts until the last remaining thing happened, and a lease or so after.
  const last = Math.max(
    0,
    ...keys.map((k) => k.at),
    ...late.map((l) => l.at),
    ...faults.map((f) => f.at + ('ms' in f ? f.ms : 0)),
  );
  return {
    ...s,
    workers,
    keys,
    late,
    faults,
    loadMs: Math.min(s.loadMs, last + 2_000),
  };
}

export function saveSchedule(file: string, s: Schedule): void {
  writeFileSync(file, `${JSON.stringify(s, null, 1)}\n`);
}

export function loadSchedule(file: string): Schedule {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Schedule;
  if (!Array.isArray(s.keys) || !Array.isArray(s.faults) || typeof s.workers !== 'number') {
    throw new Error(`${file} is not a schedule written by the fault checker`);
  }
  return s;
}

export const ALL_CONFIGS = CONFIGS;
