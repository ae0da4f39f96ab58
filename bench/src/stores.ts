/**
 * Stores (issue #3): the whole executor path over each `@idempotent-tools` store, side by side
 * with other idempotency libraries and hand-written baselines on the same server, in one run.
 *
 * Per engine: requests per call (Redis commands by MONITOR on the contender's own connection,
 * SQL statements by wrapping the driver), sequential latency p50/p99 of fresh calls (a new key)
 * and replays (a completed key) against a bare read round trip measured in the same rounds,
 * calls/s with 64 calls in flight, and Node CPU per call (`process.cpuUsage`). Contenders run
 * interleaved in rounds (alternating order); throughput is the median over the rounds and its
 * ratios the median of the per-round ratios.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import {
  type Contender,
  type Counted,
  type Engine,
  postgresEngine,
  RESULT,
  RUN,
  redisEngine,
  sqliteEngine,
  type Unit,
} from './store-contenders.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test';
const IN_FLIGHT = 64;
/** Concurrency levels of the latency sweep (1 = the sequential loop). */
const SWEEP = [16, IN_FLIGHT] as const;
/** `BENCH_STORES=redis,sqlite`: only these engines (default: all three). */
const ONLY = process.env.BENCH_STORES?.split(',').map((s) => s.trim());

interface Plan {
  /** Completed keys per contender for the replays (also the warm-up and correctness check). */
  seeds: number;
  /** Calls per operation in the request count. */
  countCalls: number;
  latencyRounds: number;
  /** Sequential calls per operation per round. */
  latencyCalls: number;
  throughputRounds: number;
  /** Length of one throughput slice (one operation, 64 in flight). */
  sliceMs: number;
}

/** `BENCH_QUICK=1`: a smoke run of a few seconds (numbers not meant to be quoted). */
const QUICK = process.env.BENCH_QUICK === '1';
const PLANS: Record<Engine['id'], Plan> = QUICK
  ? {
      redis: {
        seeds: 64,
        countCalls: 20,
        latencyRounds: 2,
        latencyCalls: 50,
        throughputRounds: 2,
        sliceMs: 100,
      },
      postgres: {
        seeds: 32,
        countCalls: 20,
        latencyRounds: 2,
        latencyCalls: 20,
        throughputRounds: 2,
        sliceMs: 100,
      },
      sqlite: {
        seeds: 64,
        countCalls: 20,
        latencyRounds: 2,
        latencyCalls: 50,
        throughputRounds: 2,
        sliceMs: 100,
      },
    }
  : {
      redis: {
        seeds: 500,
        countCalls: 200,
        latencyRounds: 10,
        latencyCalls: 300,
        throughputRounds: 9,
        sliceMs: 500,
      },
      postgres: {
        seeds: 200,
        countCalls: 100,
        latencyRounds: 8,
        latencyCalls: 150,
        throughputRounds: 7,
        sliceMs: 500,
      },
      sqlite: {
        seeds: 500,
        countCalls: 200,
        latencyRounds: 10,
        latencyCalls: 300,
        throughputRounds: 7,
        sliceMs: 400,
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
  /** p50 divided by the p50 of the contender's unit. */
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
   * Server process CPU per call with 64 in flight, µs (median over the rounds; Redis only). It
   * counts the whole server, so other clients' work inflates it.
   */
  serverUsAt64?: number;
  /** Median over the rounds of ours' calls/s divided by this one's (contenders only). */
  oursX?: number;
}

export interface SubjectResult {
  id: string;
  label: string;
  unit?: string;
  ours?: boolean;
  how?: string;
  modes: Partial<Record<Mode, ModeResult>>;
}

export interface TargetResult {
  target: string;
  measured: number;
  limit: number;
  /** `max`: measured <= limit; `min`: measured >= limit. */
  kind: 'max' | 'min';
  pass: boolean;
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
  seconds?: number;
}

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
  subject: string;
  mode: Mode;
  run: () => Promise<unknown>;
  /** Set on replays: the contender whose tool must not run. */
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

/** Seed completed keys; check that a fresh call runs the tool once and a replay does not. */
async function seed(contender: Contender, turns: Turns, count: number): Promise<void> {
  const expected = JSON.stringify(RESULT);
  const check = (value: unknown, what: string) => {
    if (JSON.stringify(value) !== expected) {
      throw new Error(`${contender.id}: ${what} returned ${JSON.stringify(value)}`);
    }
  };
  const before = contender.executions();
  for (let i = 0; i < count; i++) {
    const turnId = turns.fresh();
    check(await contender.call(turnId), 'a fresh call');
    turns.seed(turnId);
  }
  const ran = contender.executions() - before;
  if (ran !== count) throw new Error(`${contender.id}: ${count} fresh calls ran the tool ${ran}x`);
  for (let i = 0; i < count; i++) check(await contender.call(turns.replay()), 'a replay');
  if (contender.executions() - before !== count) {
    throw new Error(`${contender.id}: a replay ran the tool`);
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
  return { ns, cpuUs: used.user + used.system };
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
  };
}

const opKey = (op: { subject: string; mode: Mode }) => `${op.subject}/${op.mode}`;

async function measure(engine: Engine, plan: Plan): Promise<EngineResult> {
  const started = performance.now();
  const turns = new Map(engine.contenders.map((c) => [c.id, new Turns(c.id)]));
  for (const contender of engine.contenders) {
    await seed(contender, turns.get(contender.id)!, plan.seeds);
  }
  const ops: Op[] = [
    ...engine.units.map((unit): Op => ({ subject: unit.id, mode: 'read', run: unit.run })),
    ...engine.contenders.flatMap((c): Op[] => {
      const t = turns.get(c.id)!;
      return [
        { subject: c.id, mode: 'fresh', run: () => c.call(t.fresh()) },
        { subject: c.id, mode: 'replay', run: () => c.call(t.replay()), contender: c },
      ];
    }),
  ];
  // A replay must never run the tool (someone flushing the server would turn replays into
  // fresh calls): count it, report it.
  const replaysThatRan = new Map<string, number>();
  const guard = async <T>(op: Op, measure: () => Promise<T>): Promise<T> => {
    const before = op.contender?.executions() ?? 0;
    const result = await measure();
    const ran = (op.contender?.executions() ?? 0) - before;
    if (ran > 0) replaysThatRan.set(op.subject, (replaysThatRan.get(op.subject) ?? 0) + ran);
    return result;
  };
  for (const unit of engine.units) for (let i = 0; i < plan.seeds; i++) await unit.run();

  const counted = new Map<string, Counted>();
  for (const op of ops) {
    counted.set(opKey(op), await engine.count(op.subject, op.run, plan.countCalls));
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

  const rounds = new Map<
    string,
    { callsPerSec: number; cpuUsPerCall: number; serverUs: number | undefined }[]
  >(ops.map((op) => [opKey(op), []]));
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
      const { ns, ...slice } = await guard(op, () => concurrent(op.run, plan.sliceMs, serverCpu));
      rounds.get(opKey(op))!.push(slice);
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
        const t = turns.get(contender.id)!;
        t.reset();
        await seed(contender, t, plan.seeds);
      }
    }
  }

  const unitP50 = new Map<string, number>();
  for (const unit of engine.units) {
    const sorted = [...samples.get(`${unit.id}/read`)!.ns].sort((a, b) => a - b);
    unitP50.set(unit.id, percentile(sorted, 0.5) / 1000);
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
      label: unit.label,
      modes: { read: result(unit.id, 'read', unit.id) },
    }),
  );
  const ours = engine.contenders.find((c) => c.ours === true);
  const contenders = engine.contenders.map((c): SubjectResult => {
    const modes: Partial<Record<Mode, ModeResult>> = {};
    for (const mode of ['fresh', 'replay'] as const) {
      const r = result(c.id, mode, c.unit);
      if (ours !== undefined) {
        const mine = rounds.get(`${ours.id}/${mode}`)!;
        const theirs = rounds.get(`${c.id}/${mode}`)!;
        r.oursX = round2(median(mine.map((m, i) => m.callsPerSec / theirs[i]!.callsPerSec)));
      }
      modes[mode] = r;
    }
    return {
      id: c.id,
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
    targets: engine.id === 'redis' ? redisTargets(contenders) : [],
    ...(replaysThatRan.size > 0 ? { replaysThatRan: Object.fromEntries(replaysThatRan) } : {}),
    seconds: round1((performance.now() - started) / 1000),
  };
}

/** The targets of issue #3 (Redis). */
function redisTargets(contenders: readonly SubjectResult[]): TargetResult[] {
  const mode = (id: string, m: 'fresh' | 'replay') => contenders.find((c) => c.id === id)?.modes[m];
  const targets: TargetResult[] = [];
  const add = (
    target: string,
    measured: number | undefined,
    limit: number,
    kind: 'max' | 'min',
  ) => {
    if (measured === undefined) return;
    const pass = kind === 'max' ? measured <= limit : measured >= limit;
    targets.push({ target, measured, limit, kind, pass });
  };
  add('fresh p50 <= 2.1x GET RTT (ioredis)', mode('ours', 'fresh')?.p50xUnit, 2.1, 'max');
  add('replay p50 <= 1.15x GET RTT (ioredis)', mode('ours', 'replay')?.p50xUnit, 1.15, 'max');
  for (const m of ['fresh', 'replay'] as const) {
    add(`calls/s ${m} >= 2.5x Powertools`, mode('powertools', m)?.oursX, 2.5, 'min');
    add(`calls/s ${m} >= 1.7x node-idempotency`, mode('node-idempotency', m)?.oursX, 1.7, 'min');
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
  const parts = [`### ${engine.title}`, `${engine.version}; ${engine.settings}.`];
  parts.push(
    table(
      [
        'unit (bare read round trip)',
        ['p50 µs', 'right'],
        ['p99 µs', 'right'],
        ['calls/s, 64 in flight', 'right'],
        ['Node CPU µs/call (seq / 64)', 'right'],
        ...(server ? [['server CPU µs/call (64)', 'right'] as [string, 'right']] : []),
      ],
      engine.units.map((unit) => {
        const r = unit.modes.read!;
        return [
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
  parts.push(
    table(
      [
        'contender',
        [`${req}s/call fresh`, 'right'],
        [`${req}s/call replay`, 'right'],
        ['fresh p50 µs (x unit)', 'right'],
        ['fresh p99 µs', 'right'],
        ['replay p50 µs (x unit)', 'right'],
        ['replay p99 µs', 'right'],
        'unit',
      ],
      engine.contenders.map((c) => {
        const f = c.modes.fresh!;
        const r = c.modes.replay!;
        return [
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
      engine.contenders.map((c) => {
        const f = c.modes.fresh!;
        const r = c.modes.replay!;
        return [
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
  if (engine.targets.length > 0) {
    parts.push(
      table(
        ['target (issue #3)', ['measured', 'right'], 'result'],
        engine.targets.map((t) => [
          t.target,
          `${t.measured.toFixed(2)}x`,
          t.pass ? 'PASS' : '**FAIL**',
        ]),
      ),
    );
  }
  parts.push(
    'How each contender is called:',
    engine.contenders.map((c) => `- ${c.label}: ${c.how ?? ''}`).join('\n'),
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
  const method = `Fresh = a call with a new key; replay = a call whose key is completed; the tool returns a small object. Latency: sequential calls, interleaved rounds, p50/p99 over all of them; "x unit" = p50 / p50 of the bare read (GET / point SELECT) through the same client library, measured in the same rounds. Throughput: ${IN_FLIGHT} calls in flight, fixed-time slices, interleaved rounds, median; "ours ÷ this" = median of the per-round ratios. Node CPU = \`process.cpuUsage()\` (user + system) per call; server CPU = Redis \`INFO cpu\` delta per call (the whole server: other clients count too). Requests counted on the contender's own connection (Redis: MONITOR filtered by client address, "+n in Lua" = commands run inside its scripts; SQL: every statement the driver ran).`;
  console.log(`## Stores (issue #3)\n\n${machine()}\n\n${method}\n`);
  const setups: [Engine['id'], string, () => Promise<Engine>][] = [
    ['redis', 'Redis', () => redisEngine(REDIS_URL)],
    ['postgres', 'PostgreSQL', () => postgresEngine(DATABASE_URL)],
    ['sqlite', 'SQLite', () => sqliteEngine()],
  ];
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
        environment,
        engines: results,
      },
      null,
      2,
    )}\n`,
  );
  return results;
}
