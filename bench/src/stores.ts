/**
 * Stores (issues #3 and 19): the whole executor path over each `@idempotent-tools` store, on each
 * client it runs on, side by side with other idempotency libraries and hand-written baselines on
 * the same server, in one run, for two payload shapes (a small call and ~1 KB args + result).
 *
 * Per engine and payload: requests per call (Redis commands by MONITOR on the contender's own
 * connection, SQL statements / DynamoDB requests by wrapping the driver), sequential latency
 * p50/p99 of fresh calls (a new key) and replays (a completed key) against a bare read round trip
 * of a value of the same size measured in the same rounds, calls/s with 64 calls in flight, and
 * Node CPU per call (`process.cpuUsage`). Contenders run interleaved in rounds (alternating
 * order); throughput is the median over the rounds and its ratios the median of the per-round
 * ratios.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import {
  type Contender,
  type Counted,
  dynamodbEngine,
  type Engine,
  PAYLOADS,
  type PayloadId,
  postgresEngine,
  RUN,
  redisEngine,
  sqliteEngine,
  storedOutcome,
  type Unit,
} from './store-contenders.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const IN_FLIGHT = 64;
/** Concurrency levels of the latency sweep (1 = the sequential loop). */
const SWEEP = [16, IN_FLIGHT] as const;
/** `BENCH_STORES=redis,dynamodb`: only these engines (default: all four). */
const ONLY = process.env.BENCH_STORES?.split(',').map((s) => s.trim());

interface Plan {
  /** Completed keys per contender and payload for the replays (also the correctness check). */
  seeds: number;
  /** Calls per operation in the request count. */
  countCalls: number;
  latencyRounds: number;
  /** Sequential calls per operation per round. */
  latencyCalls: number;
  throughputRounds: number;
  /** Length of one throughput slice (one operation, 64 in flight); a 16-in-flight slice of half. */
  sliceMs: number;
}

/** `BENCH_QUICK=1`: a smoke run of a few seconds per engine (numbers not meant to be quoted). */
const QUICK = process.env.BENCH_QUICK === '1';
const QUICK_PLAN: Plan = {
  seeds: 16,
  countCalls: 10,
  latencyRounds: 2,
  latencyCalls: 20,
  throughputRounds: 2,
  sliceMs: 60,
};
/**
 * Sized for a full `stores` run of ~5 min on a 2-core machine (4 engines, 2 payloads, up to 36
 * operations per engine): Redis ~2.5 min, PostgreSQL ~1 min, SQLite and DynamoDB ~0.5 min each.
 */
const PLANS: Record<Engine['id'], Plan> = QUICK
  ? { redis: QUICK_PLAN, postgres: QUICK_PLAN, sqlite: QUICK_PLAN, dynamodb: QUICK_PLAN }
  : {
      redis: {
        seeds: 200,
        countCalls: 100,
        latencyRounds: 8,
        latencyCalls: 250,
        throughputRounds: 7,
        sliceMs: 300,
      },
      postgres: {
        seeds: 100,
        countCalls: 50,
        latencyRounds: 6,
        latencyCalls: 100,
        throughputRounds: 5,
        sliceMs: 300,
      },
      sqlite: {
        seeds: 200,
        countCalls: 100,
        latencyRounds: 6,
        latencyCalls: 250,
        throughputRounds: 5,
        sliceMs: 250,
      },
      dynamodb: {
        seeds: 100,
        countCalls: 50,
        latencyRounds: 5,
        latencyCalls: 100,
        throughputRounds: 5,
        sliceMs: 300,
      },
    };

type Mode = 'fresh' | 'replay' | 'read';

export interface ModeResult {
  /** Requests (commands / statements) the client sent per call. */
  requests: number;
  /** Commands the server ran per call, including inside Lua scripts (Redis; else = requests). */
  executed: number;
  /** Requests per call by command / statement. */
  by: Record<string, number>;
  p50Us: number;
  p99Us: number;
  meanUs: number;
  /** p50 divided by the p50 of the contender's unit (same client, same payload). */
  p50xUnit: number;
  /** Node CPU (user + system) per call in the sequential loop, µs. */
  cpuUs: number;
  /** Calls/s with 64 in flight: median over the rounds. */
  callsPerSec: number;
  /** Node CPU per call with 64 in flight, µs (median over the rounds). */
  cpuUsAt64: number;
  /** Calls/s of each round. */
  rounds: number[];
  /** p50 latency in µs by calls in flight (1: sequential; 16, 64: all calls of the slices). */
  p50UsByInFlight: Record<string, number>;
  /**
   * Server process CPU per call with 64 in flight, µs (median over the rounds; Redis, dynalite).
   * Redis counts the whole server, so other clients' work inflates it.
   */
  serverUsAt64?: number;
  /** Median over the rounds of ours' calls/s divided by this one's (contenders only). */
  oursX?: number;
}

export interface SubjectResult {
  id: string;
  /** Absent in results written before payloads (= `small`). */
  payload?: PayloadId;
  label: string;
  unit?: string;
  ours?: boolean;
  how?: string;
  modes: Partial<Record<Mode, ModeResult>>;
}

export interface TargetResult {
  payload?: PayloadId;
  target: string;
  measured: number;
  limit: number;
  /** `max`: measured <= limit; `min`: measured >= limit. */
  kind: 'max' | 'min';
  /** What the numbers are: a ratio, or µs of CPU per call. */
  unit?: 'x' | 'µs';
  /** The hand-written baseline's figure of the same kind, same run (the floor). */
  floor?: number;
  pass: boolean;
}

export interface PayloadInfo {
  id: PayloadId;
  toolName: string;
  argsBytes: number;
  resultBytes: number;
  /** Bytes of the value the units read (`{"v": result}`). */
  unitValueBytes: number;
}

export interface EngineResult {
  id: Engine['id'];
  title: string;
  version?: string;
  settings?: string;
  requestName?: string;
  plan?: Plan;
  /** Set when the engine could not run (not built, server down). */
  pending?: string;
  units: SubjectResult[];
  contenders: SubjectResult[];
  targets: TargetResult[];
  /** Replays that ran the tool (should be none: the records vanished meanwhile). */
  replaysThatRan?: Record<string, number>;
  /** Fresh calls whose tool did not run exactly once (should be none). */
  freshMismatch?: Record<string, { calls: number; ran: number }>;
  seconds?: number;
}

/** One subject (a contender or a unit) on one payload. */
const sid = (s: { id: string; payload: PayloadId }) => `${s.id}@${s.payload}`;

/** The turn ids of a contender: a new one per fresh call, a cycle over completed ones to replay. */
class Turns {
  #next = 0;
  #replayed = 0;
  readonly #seeded: string[] = [];
  readonly id: string;
  constructor(id: string) {
    this.id = id;
  }
  fresh(): string {
    return `turn-${RUN}-${this.id}-${this.#next++}`;
  }
  replay(): string {
    return this.#seeded[this.#replayed++ % this.#seeded.length]!;
  }
  seed(turnId: string): void {
    this.#seeded.push(turnId);
  }
  /** Forget the completed keys (the engine deleted them). */
  reset(): void {
    this.#seeded.length = 0;
    this.#replayed = 0;
  }
}

interface Op {
  /** `sid` of the subject. */
  subject: string;
  /** Id of the subject (its connection, for the request count). */
  id: string;
  mode: Mode;
  run: () => Promise<unknown>;
  /** Set on fresh calls and replays: the contender whose tool runs once / must not run. */
  contender?: Contender;
}

function median(numbers: readonly number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile of sorted numbers. */
function percentile(sorted: readonly number[], p: number): number {
  const rank = Math.ceil(p * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const round2 = (n: number) => Math.round(n * 100) / 100;

const payloadOf = (id: PayloadId) => PAYLOADS.find((p) => p.id === id)!;

/** Seed completed keys; check that a fresh call runs the tool once and a replay does not. */
async function seed(contender: Contender, turns: Turns, count: number): Promise<void> {
  const expected = JSON.stringify(payloadOf(contender.payload).result);
  const name = sid(contender);
  const check = (value: unknown, what: string) => {
    if (JSON.stringify(value) !== expected) {
      throw new Error(`${name}: ${what} returned ${JSON.stringify(value)}`);
    }
  };
  const before = contender.executions();
  for (let i = 0; i < count; i++) {
    const turnId = turns.fresh();
    check(await contender.call(turnId), 'a fresh call');
    turns.seed(turnId);
  }
  const ran = contender.executions() - before;
  if (ran !== count) throw new Error(`${name}: ${count} fresh calls ran the tool ${ran}x`);
  for (let i = 0; i < count; i++) check(await contender.call(turns.replay()), 'a replay');
  if (contender.executions() - before !== count) {
    throw new Error(`${name}: a replay ran the tool`);
  }
}

async function sequential(op: () => Promise<unknown>, calls: number) {
  const ns = new Array<number>(calls);
  const cpu = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const start = process.hrtime.bigint();
    await op();
    ns[i] = Number(process.hrtime.bigint() - start);
  }
  const used = process.cpuUsage(cpu);
  return { ns, cpuUs: used.user + used.system, calls };
}

async function concurrent(
  op: () => Promise<unknown>,
  ms: number,
  serverCpu: (() => Promise<number>) | undefined,
  inFlight: number = IN_FLIGHT,
) {
  let calls = 0;
  const ns: number[] = [];
  const serverBefore = await serverCpu?.();
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  const worker = async () => {
    while (performance.now() < end) {
      const t0 = process.hrtime.bigint();
      await op();
      ns.push(Number(process.hrtime.bigint() - t0));
      calls++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const serverAfter = await serverCpu?.();
  const serverUs =
    serverBefore === undefined || serverAfter === undefined
      ? undefined
      : ((serverAfter - serverBefore) * 1e6) / calls;
  return {
    callsPerSec: (calls / elapsed) * 1000,
    cpuUsPerCall: (used.user + used.system) / calls,
    serverUs,
    ns,
    calls,
  };
}

const opKey = (op: { subject: string; mode: Mode }) => `${op.subject}/${op.mode}`;

/** Per-round calls/s, by `opKey`. */
type Rounds = Map<
  string,
  { callsPerSec: number; cpuUsPerCall: number; serverUs: number | undefined }[]
>;

async function measure(engine: Engine, plan: Plan): Promise<EngineResult> {
  const started = performance.now();
  const turns = new Map(engine.contenders.map((c) => [sid(c), new Turns(sid(c))]));
  for (const contender of engine.contenders) {
    await seed(contender, turns.get(sid(contender))!, plan.seeds);
  }
  const ops: Op[] = [
    ...engine.units.map(
      (unit): Op => ({ subject: sid(unit), id: unit.id, mode: 'read', run: unit.run }),
    ),
    ...engine.contenders.flatMap((c): Op[] => {
      const t = turns.get(sid(c))!;
      return [
        { subject: sid(c), id: c.id, mode: 'fresh', run: () => c.call(t.fresh()), contender: c },
        { subject: sid(c), id: c.id, mode: 'replay', run: () => c.call(t.replay()), contender: c },
      ];
    }),
  ];
  // A replay must never run the tool (someone flushing the server would turn replays into
  // fresh calls), a fresh call must run it once: count what differs, report it.
  const replaysThatRan = new Map<string, number>();
  const freshMismatch = new Map<string, { calls: number; ran: number }>();
  const guard = async <T extends { calls: number }>(
    op: Op,
    measure: () => Promise<T>,
  ): Promise<T> => {
    const before = op.contender?.executions() ?? 0;
    const result = await measure();
    const ran = (op.contender?.executions() ?? 0) - before;
    if (op.mode === 'replay' && ran > 0) {
      replaysThatRan.set(op.subject, (replaysThatRan.get(op.subject) ?? 0) + ran);
    }
    if (op.mode === 'fresh' && ran !== result.calls) {
      const m = freshMismatch.get(op.subject) ?? { calls: 0, ran: 0 };
      freshMismatch.set(op.subject, { calls: m.calls + result.calls, ran: m.ran + ran });
    }
    return result;
  };
  for (const unit of engine.units) for (let i = 0; i < plan.seeds; i++) await unit.run();

  const counted = new Map<string, Counted>();
  for (const op of ops) {
    counted.set(opKey(op), await engine.count(op.id, op.run, plan.countCalls));
  }

  const samples = new Map<string, { ns: number[]; cpuUs: number; calls: number }>(
    ops.map((op) => [opKey(op), { ns: [], cpuUs: 0, calls: 0 }]),
  );
  for (let round = 0; round < plan.latencyRounds; round++) {
    for (const op of round % 2 === 0 ? ops : [...ops].reverse()) {
      const { ns, cpuUs } = await guard(op, () => sequential(op.run, plan.latencyCalls));
      const sample = samples.get(opKey(op))!;
      sample.ns.push(...ns);
      sample.cpuUs += cpuUs;
      sample.calls += ns.length;
    }
  }

  const rounds: Rounds = new Map(ops.map((op) => [opKey(op), []]));
  /** Latencies of every call of the slices, by op and calls in flight. */
  const sweep = new Map<string, number[]>();
  const swept = (op: Op, inFlight: number) => {
    const k = `${opKey(op)}@${inFlight}`;
    if (!sweep.has(k)) sweep.set(k, []);
    return sweep.get(k)!;
  };
  const serverCpu = engine.serverCpu?.bind(engine);
  for (let round = 0; round < plan.throughputRounds; round++) {
    for (const op of round % 2 === 0 ? ops : [...ops].reverse()) {
      const { ns, callsPerSec, cpuUsPerCall, serverUs } = await guard(op, () =>
        concurrent(op.run, plan.sliceMs, serverCpu),
      );
      rounds.get(opKey(op))!.push({ callsPerSec, cpuUsPerCall, serverUs });
      const at64 = swept(op, IN_FLIGHT);
      for (const v of ns) at64.push(v);
      for (const inFlight of SWEEP.filter((n) => n !== IN_FLIGHT)) {
        const other = await guard(op, () =>
          concurrent(op.run, plan.sliceMs / 2, undefined, inFlight),
        );
        const atN = swept(op, inFlight);
        for (const v of other.ns) atN.push(v);
      }
    }
    if (engine.clear !== undefined && round + 1 < plan.throughputRounds) {
      // Fresh calls at 64 in flight leave ~10^5 records per round: start each round from the
      // same data set size (and server memory), then complete new keys for the replays.
      await engine.clear();
      for (const contender of engine.contenders) {
        const t = turns.get(sid(contender))!;
        t.reset();
        await seed(contender, t, plan.seeds);
      }
    }
  }

  const unitP50 = new Map<string, number>();
  for (const unit of engine.units) {
    const sorted = [...samples.get(`${sid(unit)}/read`)!.ns].sort((a, b) => a - b);
    unitP50.set(sid(unit), percentile(sorted, 0.5) / 1000);
  }
  const result = (subject: string, mode: Mode, unit: string): ModeResult => {
    const key = `${subject}/${mode}`;
    const { ns, cpuUs, calls } = samples.get(key)!;
    const sorted = [...ns].sort((a, b) => a - b);
    const count = counted.get(key)!;
    const perRound = rounds.get(key)!;
    const p50Us = percentile(sorted, 0.5) / 1000;
    const out: ModeResult = {
      requests: round2(count.requests),
      executed: round2(count.executed),
      by: Object.fromEntries(Object.entries(count.by).map(([k, v]) => [k, round2(v)])),
      p50Us: round1(p50Us),
      p99Us: round1(percentile(sorted, 0.99) / 1000),
      meanUs: round1(sorted.reduce((a, b) => a + b, 0) / sorted.length / 1000),
      p50xUnit: round2(p50Us / unitP50.get(unit)!),
      cpuUs: round1(cpuUs / calls),
      callsPerSec: Math.round(median(perRound.map((r) => r.callsPerSec))),
      cpuUsAt64: round1(median(perRound.map((r) => r.cpuUsPerCall))),
      rounds: perRound.map((r) => Math.round(r.callsPerSec)),
      p50UsByInFlight: { '1': round1(p50Us) },
    };
    for (const inFlight of SWEEP) {
      const all = [...(sweep.get(`${key}@${inFlight}`) ?? [])].sort((a, b) => a - b);
      if (all.length > 0)
        out.p50UsByInFlight[String(inFlight)] = round1(percentile(all, 0.5) / 1000);
    }
    const server = perRound.flatMap((r) => (r.serverUs === undefined ? [] : [r.serverUs]));
    if (server.length > 0) out.serverUsAt64 = round1(median(server));
    return out;
  };
  const units = engine.units.map(
    (unit: Unit): SubjectResult => ({
      id: unit.id,
      payload: unit.payload,
      label: unit.label,
      modes: { read: result(sid(unit), 'read', sid(unit)) },
    }),
  );
  /** Median of the per-round ratios of a's calls/s to b's (ids, same payload and mode). */
  const ratio = (a: string, b: string, mode: 'fresh' | 'replay', payload: PayloadId) => {
    const mine = rounds.get(`${a}@${payload}/${mode}`);
    const theirs = rounds.get(`${b}@${payload}/${mode}`);
    if (mine === undefined || theirs === undefined) return undefined;
    return round2(median(mine.map((m, i) => m.callsPerSec / theirs[i]!.callsPerSec)));
  };
  const contenders = engine.contenders.map((c): SubjectResult => {
    // "ours" in the ratios: the engine's first own row (ours on ioredis / pg / node:sqlite).
    const ours = engine.contenders.find((o) => o.ours === true && o.payload === c.payload);
    const modes: Partial<Record<Mode, ModeResult>> = {};
    for (const mode of ['fresh', 'replay'] as const) {
      const r = result(sid(c), mode, `${c.unit}@${c.payload}`);
      const x = ours === undefined ? undefined : ratio(ours.id, c.id, mode, c.payload);
      if (x !== undefined) r.oursX = x;
      modes[mode] = r;
    }
    return {
      id: c.id,
      payload: c.payload,
      label: c.label,
      unit: c.unit,
      how: c.how,
      modes,
      ...(c.ours === true ? { ours: true } : {}),
    };
  });
  return {
    id: engine.id,
    title: engine.title,
    version: engine.version,
    settings: engine.settings,
    requestName: engine.requestName,
    plan,
    units,
    contenders,
    targets: engine.id === 'redis' ? redisTargets(contenders, ratio) : [],
    ...(replaysThatRan.size > 0 ? { replaysThatRan: Object.fromEntries(replaysThatRan) } : {}),
    ...(freshMismatch.size > 0 ? { freshMismatch: Object.fromEntries(freshMismatch) } : {}),
    seconds: round1((performance.now() - started) / 1000),
  };
}

/**
 * The targets of issue 19 (Redis), per payload. On the node-redis driver: calls/s at 64 in
 * flight, fresh and replay, >= node-idempotency's and >= 1.5x Powertools', Node CPU per call at
 * 64 in flight <= node-idempotency's; on ioredis: calls/s >= the hand-written `SET NX GET`'s;
 * fresh p50 <= 2.15x and replay p50 <= 1.15x the bare GET of the same client (ioredis, node-redis).
 * The floor: the hand-written baseline's figure of the same kind.
 */
function redisTargets(
  contenders: readonly SubjectResult[],
  ratio: (a: string, b: string, mode: 'fresh' | 'replay', payload: PayloadId) => number | undefined,
): TargetResult[] {
  const targets: TargetResult[] = [];
  for (const { id: payload } of PAYLOADS) {
    const mode = (id: string, m: 'fresh' | 'replay') =>
      contenders.find((c) => c.id === id && c.payload === payload)?.modes[m];
    const add = (
      target: string,
      measured: number | undefined,
      limit: number | undefined,
      kind: 'max' | 'min',
      floor: number | undefined,
      unit: 'x' | 'µs' = 'x',
    ) => {
      if (measured === undefined || limit === undefined) return;
      const pass = kind === 'max' ? measured <= limit : measured >= limit;
      targets.push({
        payload,
        target,
        measured,
        limit,
        kind,
        unit,
        ...(floor === undefined ? {} : { floor }),
        pass,
      });
    };
    for (const m of ['fresh', 'replay'] as const) {
      add(
        `node-redis: calls/s ${m} >= node-idempotency's`,
        ratio('ours-node-redis', 'node-idempotency', m, payload),
        1,
        'min',
        ratio('baseline', 'node-idempotency', m, payload),
      );
      add(
        `node-redis: calls/s ${m} >= 1.5x Powertools'`,
        ratio('ours-node-redis', 'powertools', m, payload),
        1.5,
        'min',
        ratio('baseline', 'powertools', m, payload),
      );
      add(
        `node-redis: Node CPU/call ${m} (64) <= node-idempotency's`,
        mode('ours-node-redis', m)?.cpuUsAt64,
        mode('node-idempotency', m)?.cpuUsAt64,
        'max',
        mode('baseline', m)?.cpuUsAt64,
        'µs',
      );
    }
    for (const m of ['fresh', 'replay'] as const) {
      add(
        `ioredis: calls/s ${m} >= hand-written SET NX GET's`,
        ratio('ours', 'baseline', m, payload),
        1,
        'min',
        undefined,
      );
    }
    for (const [id, client] of [
      ['ours', 'ioredis'],
      ['ours-node-redis', '@redis/client'],
    ] as const) {
      add(
        `${client}: fresh p50 <= 2.15x GET`,
        mode(id, 'fresh')?.p50xUnit,
        2.15,
        'max',
        mode('baseline', 'fresh')?.p50xUnit,
      );
      add(
        `${client}: replay p50 <= 1.15x GET`,
        mode(id, 'replay')?.p50xUnit,
        1.15,
        'max',
        mode('baseline', 'replay')?.p50xUnit,
      );
    }
  }
  return targets;
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const us = (n: number) => (n >= 100 ? int(n) : n.toFixed(1));

function requestsCell(r: ModeResult, engine: EngineResult): string {
  const inScripts = r.executed - r.requests;
  const base = Number.isInteger(r.requests) ? String(r.requests) : r.requests.toFixed(2);
  return engine.id === 'redis' && inScripts > 0.005
    ? `${base} (+${round1(inScripts)} in Lua)`
    : base;
}

/**
 * A markdown table with padded, aligned columns (the layout the repository's formatter keeps).
 * `right` columns are right-aligned (numbers).
 */
export function table(
  columns: readonly (string | [string, 'right'])[],
  rows: readonly string[][],
): string {
  const titles = columns.map((c) => (typeof c === 'string' ? c : c[0]));
  const right = columns.map((c) => typeof c !== 'string');
  const length = (text: string) => [...text].length;
  const widths = titles.map((title, i) =>
    Math.max(3, length(title), ...rows.map((row) => length(row[i] ?? ''))),
  );
  const line = (cells: readonly string[]) =>
    `| ${cells
      .map((cell, i) => {
        const pad = ' '.repeat(widths[i]! - length(cell));
        return right[i] ? pad + cell : cell + pad;
      })
      .join(' | ')} |`;
  const rule = widths.map((w, i) => (right[i] ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w)));
  return [line(titles), line(rule), ...rows.map(line)].join('\n');
}

/** A short form of a plan, for the report. */
function planText(plan: Plan): string {
  return `${plan.seeds} completed keys per contender and payload; requests counted over ${plan.countCalls} calls; ${plan.latencyRounds} latency rounds x ${plan.latencyCalls} sequential calls per operation; ${plan.throughputRounds} throughput rounds of ${plan.sliceMs} ms at ${IN_FLIGHT} in flight (+ ${plan.sliceMs / 2} ms at 16) per operation`;
}

const payloadOrder = (r: SubjectResult) =>
  PAYLOADS.findIndex((p) => p.id === (r.payload ?? 'small'));
/** Rows grouped by payload, in the engine's order within each. */
const byPayload = (rows: readonly SubjectResult[]) =>
  [...rows].sort((a, b) => payloadOrder(a) - payloadOrder(b));

function engineMarkdown(engine: EngineResult): string {
  if (engine.pending !== undefined) return `### ${engine.title}\n\nPending: ${engine.pending}\n`;
  const req = engine.requestName ?? 'request';
  const server = engine.units.some((u) => u.modes.read?.serverUsAt64 !== undefined);
  const serverCells = (...modes: (ModeResult | undefined)[]) =>
    server
      ? [modes.map((m) => (m?.serverUsAt64 === undefined ? '?' : us(m.serverUsAt64))).join(' / ')]
      : [];
  const name = (c: SubjectResult) => (c.ours === true ? `**${c.label}**` : c.label);
  const unitLabel = (id: string | undefined) => engine.units.find((u) => u.id === id)?.label ?? '?';
  const payload = (r: { payload?: PayloadId }) => r.payload ?? 'small';
  const parts = [`### ${engine.title}`, `${engine.version}; ${engine.settings}.`];
  if (engine.plan !== undefined) {
    parts.push(
      `Counts: ${planText(engine.plan)}; ${engine.seconds ?? '?'} s for this engine. "ours ÷ this": the first row of the payload (${engine.contenders[0]?.label ?? '?'}) ÷ this row.`,
    );
  }
  parts.push(
    table(
      [
        'payload',
        'unit (bare read round trip)',
        ['p50 µs', 'right'],
        ['p99 µs', 'right'],
        ['calls/s, 64 in flight', 'right'],
        ['Node CPU µs/call (seq / 64)', 'right'],
        ...(server ? [['server CPU µs/call (64)', 'right'] as [string, 'right']] : []),
      ],
      byPayload(engine.units).map((unit) => {
        const r = unit.modes.read!;
        return [
          payload(unit),
          unit.label,
          us(r.p50Us),
          us(r.p99Us),
          int(r.callsPerSec),
          `${us(r.cpuUs)} / ${us(r.cpuUsAt64)}`,
          ...serverCells(r),
        ];
      }),
    ),
  );
  const contenders = byPayload(engine.contenders);
  parts.push(
    table(
      [
        'payload',
        'contender',
        [`${req}s/call fresh`, 'right'],
        [`${req}s/call replay`, 'right'],
        ['fresh p50 µs (x unit)', 'right'],
        ['fresh p99 µs', 'right'],
        ['replay p50 µs (x unit)', 'right'],
        ['replay p99 µs', 'right'],
        'unit',
      ],
      contenders.map((c) => {
        const f = c.modes.fresh!;
        const r = c.modes.replay!;
        return [
          payload(c),
          name(c),
          requestsCell(f, engine),
          requestsCell(r, engine),
          `${us(f.p50Us)} (${f.p50xUnit.toFixed(2)}x)`,
          us(f.p99Us),
          `${us(r.p50Us)} (${r.p50xUnit.toFixed(2)}x)`,
          us(r.p99Us),
          unitLabel(c.unit),
        ];
      }),
    ),
  );
  parts.push(
    table(
      [
        'payload',
        'contender',
        ['calls/s fresh, 64 in flight', 'right'],
        ['ours ÷ this', 'right'],
        ['calls/s replay, 64 in flight', 'right'],
        ['ours ÷ this', 'right'],
        ['Node CPU µs/call fresh (seq / 64)', 'right'],
        ['replay (seq / 64)', 'right'],
        ...(server
          ? [['server CPU µs/call (64) fresh / replay', 'right'] as [string, 'right']]
          : []),
      ],
      contenders.map((c) => {
        const f = c.modes.fresh!;
        const r = c.modes.replay!;
        return [
          payload(c),
          name(c),
          int(f.callsPerSec),
          `${(f.oursX ?? 1).toFixed(2)}x`,
          int(r.callsPerSec),
          `${(r.oursX ?? 1).toFixed(2)}x`,
          `${us(f.cpuUs)} / ${us(f.cpuUsAt64)}`,
          `${us(r.cpuUs)} / ${us(r.cpuUsAt64)}`,
          ...serverCells(f, r),
        ];
      }),
    ),
  );
  if (engine.replaysThatRan !== undefined) {
    parts.push(
      `**Warning**: some replays ran the tool (records deleted meanwhile?): ${JSON.stringify(engine.replaysThatRan)}.`,
    );
  }
  if (engine.freshMismatch !== undefined) {
    parts.push(
      `**Warning**: some fresh calls did not run the tool exactly once: ${JSON.stringify(engine.freshMismatch)}.`,
    );
  }
  if (engine.targets.length > 0) {
    const value = (t: TargetResult, n: number) =>
      t.unit === 'µs' ? `${n.toFixed(1)} µs` : `${n.toFixed(2)}x`;
    parts.push(
      table(
        [
          'payload',
          'target (issue 19)',
          ['measured', 'right'],
          ['target', 'right'],
          ['hand-written `SET NX GET` floor, same run', 'right'],
          'result',
        ],
        engine.targets.map((t) => [
          t.payload ?? 'small',
          t.target,
          value(t, t.measured),
          `${t.kind === 'max' ? '<=' : '>='} ${value(t, t.limit)}`,
          t.floor === undefined ? '-' : value(t, t.floor),
          t.pass ? 'PASS' : '**FAIL**',
        ]),
      ),
      "(Floor: the hand-written baseline's own figure of the same kind, from the same run: its x unit, its calls/s ÷ the other library's, its Node CPU per call at 64 in flight.)",
    );
  }
  const seen = new Set<string>();
  parts.push(
    'How each contender is called:',
    engine.contenders
      .filter((c) => !seen.has(c.id) && seen.add(c.id) !== undefined)
      .map((c) => `- ${c.label}: ${c.how ?? ''}`)
      .join('\n'),
  );
  return `${parts.join('\n\n')}\n`;
}

function cpuModel(): string {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line !== undefined) return line.slice(line.indexOf(':') + 1).trim();
  } catch {
    // not Linux
  }
  return cpus()[0]?.model ?? 'unknown';
}

/** Replace the earlier copy of a `## ` section of RESULTS.md (or add it at the end). */
export function writeSection(file: URL, heading: string, body: string): void {
  let text = existsSync(file)
    ? readFileSync(file, 'utf8')
    : '# Bench results\n\nWritten by the benches (`pnpm bench`); each bench replaces its own section. Numbers are comparable only within one section (one run, one machine).\n';
  const at = text.indexOf(`\n${heading}\n`);
  if (at >= 0) {
    const next = text.indexOf('\n## ', at + heading.length + 1);
    text = text.slice(0, at + 1) + (next >= 0 ? text.slice(next + 1) : '');
  }
  writeFileSync(file, `${text.trimEnd()}\n\n${heading}\n\n${body.trimEnd()}\n`);
}

export async function runStoresBench(): Promise<EngineResult[]> {
  const startedAt = new Date();
  const environment = {
    nproc: availableParallelism(),
    cpu: cpuModel(),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    loadAverageAtStart: loadavg().map(round2),
    loadAverageAtEnd: [] as number[],
  };
  const machine = () =>
    `Machine: ${environment.nproc} cores (nproc), ${environment.cpu}, Node ${environment.node} (${environment.platform}); the servers run on the same machine (loopback). Load average ${environment.loadAverageAtStart.join(' / ')} at start${environment.loadAverageAtEnd.length > 0 ? `, ${environment.loadAverageAtEnd.join(' / ')} at end` : ''}.`;
  const payloads: PayloadInfo[] = PAYLOADS.map((p) => ({
    id: p.id,
    toolName: p.toolName,
    argsBytes: Buffer.byteLength(JSON.stringify(p.args)),
    resultBytes: Buffer.byteLength(JSON.stringify(p.result)),
    unitValueBytes: Buffer.byteLength(storedOutcome(p)),
  }));
  const payloadText = payloads
    .map(
      (p) =>
        `\`${p.id}\` (\`${p.toolName}\`): ${p.argsBytes} B of args, a ${p.resultBytes} B result, units read ${p.unitValueBytes} B`,
    )
    .join('; ');
  const method = `Payloads (every contender runs both, in the same rounds): ${payloadText} (JSON bytes, UTF-8). Fresh = a call with a new key; replay = a call whose key is completed. Latency: sequential calls, interleaved rounds, p50/p99 over all of them; "x unit" = p50 / p50 of the bare read (Redis GET / point SELECT / GetItem) through the same client library, of a value the size of the payload's stored outcome (\`{"v": result}\`, what the hand-written baselines store), measured in the same rounds. Throughput: ${IN_FLIGHT} calls in flight, fixed-time slices, interleaved rounds, median; "ours ÷ this" = median of the per-round ratios. Node CPU = \`process.cpuUsage()\` (user + system) per call; server CPU = Redis \`INFO cpu\` delta per call (the whole server: other clients count too), dynalite's process CPU from /proc. Requests counted on the contender's own connection (Redis: MONITOR filtered by client address, "+n in Lua" = commands run inside its scripts; SQL: every statement the driver ran; DynamoDB: every request the SDK client sent). dynalite is not DynamoDB (JavaScript on an in-memory LevelDB, on this machine): only ratios within its section mean anything.`;
  console.log(`## Stores (issue #3)\n\n${machine()}\n\n${method}\n`);
  const setups: [Engine['id'], string, () => Promise<Engine>][] = [
    ['redis', 'Redis', () => redisEngine(REDIS_URL)],
    ['postgres', 'PostgreSQL', () => postgresEngine(DATABASE_URL)],
    ['sqlite', 'SQLite', () => sqliteEngine()],
    ['dynamodb', 'DynamoDB (dynalite)', () => dynamodbEngine()],
  ];
  const unknown = ONLY?.filter((id) => !setups.some(([known]) => known === id)) ?? [];
  if (unknown.length > 0) {
    throw new Error(
      `BENCH_STORES: unknown engine ${unknown.join(', ')}; known: ${setups.map(([id]) => id).join(', ')}.`,
    );
  }
  const results: EngineResult[] = [];
  for (const [id, title, setup] of setups) {
    if (ONLY !== undefined && !ONLY.includes(id)) continue;
    let engine: Engine;
    try {
      engine = await setup();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const result = { id, title, pending: reason, units: [], contenders: [], targets: [] };
      results.push(result);
      console.log(engineMarkdown(result));
      continue;
    }
    try {
      const result = await measure(engine, PLANS[id]);
      results.push(result);
      console.log(engineMarkdown(result));
    } finally {
      await engine.close();
    }
  }
  environment.loadAverageAtEnd = loadavg().map(round2);

  const versions = results.map((r) => r.version ?? `${r.title}: pending`).join(', ');
  const markdown = [
    `Run ${startedAt.toISOString()}${QUICK ? ' (BENCH_QUICK: smoke numbers, not to be quoted)' : ''}, \`node src/run.ts stores\`. ${machine()} Servers: ${versions}.`,
    '',
    method,
    '',
    results.map(engineMarkdown).join('\n'),
  ].join('\n');
  writeSection(new URL('../RESULTS.md', import.meta.url), '## Stores (issue #3)', markdown);

  const dir = new URL('../results/', import.meta.url);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    new URL('stores.json', dir),
    `${JSON.stringify(
      {
        bench: 'stores',
        startedAt: startedAt.toISOString(),
        quick: QUICK,
        inFlight: IN_FLIGHT,
        payloads,
        environment,
        engines: results,
      },
      null,
      2,
    )}\n`,
  );
  return results;
}
