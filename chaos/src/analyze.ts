/**
 * The soak's verdict: the vendors' logs (every effect, whatever the workers and the store say)
 * held against the store's records and what every caller was told.
 *
 * Per key: effects (plain vendor: every request; dedupe vendor: every new Idempotency-Key), the
 * record before and after the checker, the checker's answer, the ids callers got back. Invariants
 * (each must be 0): keys with more than one effect (apart from the known limit below), keys whose
 * effect happened but whose record is missing or holds another outcome, records holding an outcome
 * no effect produced, callers of one key told different outcomes, keys stuck without an outcome
 * that nothing explains.
 *
 * The known limit, reported apart: a holder frozen after its ownership check and before the vendor
 * received its request (no check can close that window); the plain vendor then sees two effects,
 * the deduping vendor makes it safe.
 */
import type { IdempotencyRecord } from '@idempotent-tools/core';
import type {
  CallReport,
  ChaosEvent,
  FreezePhase,
  JournalLine,
  StoreKind,
  VendorLine,
  VendorName,
} from './types.ts';

export interface KeyPlan {
  key: string;
  vendor: VendorName;
  /** Sent to several workers at once. */
  concurrent: boolean;
  /** The first reply was "lost": the worker called again. */
  lostReply: boolean;
  /** A key made for a targeted freeze at this phase. */
  targeted?: FreezePhase;
  /** The targeted freeze happened on this key (its holder froze and was continued). */
  fired?: boolean;
  /** The lost-reply retry did not replay the first outcome (set by the harness). */
  lostReplyMismatch?: string;
}

/** An outcome a caller was told. */
export interface Seen {
  by: string;
  id: string;
  outcome: string;
}

export interface SoakCounts {
  calls: number;
  kills: number;
  stops: number;
  targetedFreezes: number;
  restarts: number;
  crashedCalls: number;
  successors: number;
  retries: number;
  lateRetries: number;
  unexpectedExits: number;
  settleKills: number;
  outcomes: Record<string, number>;
  targetedFired: Record<string, number>;
}

export type CheckerReport = CallReport & { cause?: string };

/** Why a key has more than one effect. */
export type DuplicateCause =
  /** A holder frozen between its ownership check and the vendor's receipt (the known limit). */
  | 'frozen-mid-request'
  /** A holder frozen after its run began and before its check, which let it through (the stalled-holder bug). */
  | 'stalled-holder'
  /** An attempt that overlapped an engine restart. */
  | 'engine-restart'
  | 'other';

/** One key's story, for the report of a failed invariant. */
export interface KeyHistory {
  key: string;
  vendor: VendorName;
  idemKey: string;
  plan: string;
  cause?: DuplicateCause;
  /** Times are ms after the key's first journal line. */
  vendorLog: string[];
  journal: string[];
  chaos: string[];
  recordBeforeChecker: string;
  recordFinal: string;
  checker: string;
  callers: string[];
}

export interface SoakResult {
  store: StoreKind;
  /** Which code ran: the commit, and whether core had uncommitted changes. */
  code?: string;
  engine: string;
  finishedAt: string;
  options: Record<string, unknown>;
  keys: number;
  calls: number;
  loadSeconds: number;
  callsPerSecond: number;
  faults: {
    kills: number;
    stops: number;
    targetedFreezes: number;
    targetedFired: Record<string, number>;
    engineRestarts: number;
    /** How long each engine restart took, crash to answering again (ms). */
    engineDownMs: { mean: number; max: number };
    crashedCalls: number;
    successors: number;
    retries: number;
    lateRetries: number;
    unexpectedExits: number;
    settleKills: number;
  };
  outcomes: Record<string, number>;
  checkerOutcomes: Record<string, number>;
  invariants: {
    maxEffectsPerKey: number;
    keysOverOneEffect: number;
    duplicates: Record<VendorName, Record<DuplicateCause, number>>;
    recordMismatch: { missing: number; failed: number; otherOutcome: number };
    phantomOutcomes: number;
    disagreements: number;
    lostReplyMismatches: number;
    stuck: { explained: number; unexplained: number; reasons: Record<string, number> };
    neverRan: number;
    ranByChecker: number;
    /** Records still in progress when the workers stopped (the checker's retry settled them or not). */
    inProgressAtSettle: number;
    dedupeSaved: number;
    dedupeRawRequests: number;
    dedupeEffects: number;
    plainEffects: number;
  };
  /** Every key whose targeted freeze fired: what the vendor saw. */
  targeted: {
    key: string;
    phase: FreezePhase;
    vendor: VendorName;
    effects: number;
    requests: number;
    cause?: DuplicateCause;
    /** The key's story (left out of chaos.json). */
    history?: KeyHistory;
  }[];
  failures: string[];
  verdict: 'PASS' | 'FAIL';
  examples: Record<string, KeyHistory>;
  notes: string[];
  dir?: string;
}

export interface AnalysisInput {
  store: StoreKind;
  engine: string;
  options: object;
  keys: (KeyPlan & { idemKey: string; seen: Seen[] })[];
  vendorLines: VendorLine[];
  journal: JournalLine[];
  events: ChaosEvent[];
  pre: Map<string, IdempotencyRecord | undefined>;
  final: Map<string, IdempotencyRecord | undefined>;
  checker: Map<string, CheckerReport>;
  loadMs: number;
  loadCalls: number;
  counts: SoakCounts;
  notes: string[];
  dir: string | undefined;
}

function group<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = map.get(k);
    if (list === undefined) map.set(k, [item]);
    else list.push(item);
  }
  return map;
}

/** The vendor id a record's stored outcome holds (outcomes are `{"v":{"id":...}}`, not encrypted). */
export function recordId(record: IdempotencyRecord | undefined): string | undefined {
  if (record?.outcome === undefined) return undefined;
  try {
    const parsed = JSON.parse(record.outcome) as { v?: { id?: unknown } };
    return typeof parsed.v?.id === 'string' ? parsed.v.id : undefined;
  } catch {
    return undefined;
  }
}

function describeRecord(record: IdempotencyRecord | undefined, t0: number): string {
  if (record === undefined) return 'none';
  const parts = [`${record.state}`, `token ${record.token.slice(0, 8)}`];
  parts.push(`created +${record.createdAt - t0} ms`);
  if (record.state === 'in_progress') parts.push(`lease until +${record.leaseExpiresAt - t0} ms`);
  if (record.outcome !== undefined) parts.push(`outcome ${record.outcome.slice(0, 120)}`);
  return parts.join(', ');
}

export function analyze(input: AnalysisInput): SoakResult {
  const linesByKey = group(input.vendorLines, (l) => l.key);
  const journalByKey = group(input.journal, (l) => l.key);
  const stops = input.events.filter((e) => e.type === 'stop' || e.type === 'targeted-freeze');
  const stopsByPid = group(stops, (e) => String(e.pid));
  const restarts = input.events.filter((e) => e.type === 'engine-restart');
  const overlaps = (e: ChaosEvent, from: number, to: number) =>
    e.from < to && (e.to ?? Number.POSITIVE_INFINITY) > from;

  const causeOf = (effects: VendorLine[]): DuplicateCause => {
    const frozen = (l: VendorLine) => stopsByPid.get(String(l.pid)) ?? [];
    if (effects.some((l) => frozen(l).some((e) => overlaps(e, l.checked, l.received)))) {
      return 'frozen-mid-request';
    }
    // Frozen after its run began (the claim, the tool's start) and before its last check.
    const began = (l: VendorLine) => l.called ?? l.started;
    if (effects.some((l) => frozen(l).some((e) => overlaps(e, began(l), l.checked)))) {
      return 'stalled-holder';
    }
    if (effects.some((l) => restarts.some((e) => overlaps(e, began(l), l.received)))) {
      return 'engine-restart';
    }
    return 'other';
  };

  const zero = (): Record<DuplicateCause, number> => ({
    'frozen-mid-request': 0,
    'stalled-holder': 0,
    'engine-restart': 0,
    other: 0,
  });
  const inv: SoakResult['invariants'] = {
    maxEffectsPerKey: 0,
    keysOverOneEffect: 0,
    duplicates: { plain: zero(), dedupe: zero() },
    recordMismatch: { missing: 0, failed: 0, otherOutcome: 0 },
    phantomOutcomes: 0,
    disagreements: 0,
    lostReplyMismatches: 0,
    stuck: { explained: 0, unexplained: 0, reasons: {} },
    neverRan: 0,
    ranByChecker: 0,
    inProgressAtSettle: 0,
    dedupeSaved: 0,
    dedupeRawRequests: 0,
    dedupeEffects: 0,
    plainEffects: 0,
  };
  const checkerOutcomes: Record<string, number> = {};
  const targeted: SoakResult['targeted'] = [];
  const examples: Record<string, KeyHistory> = {};

  const history = (k: AnalysisInput['keys'][number], cause?: DuplicateCause): KeyHistory => {
    const lines = linesByKey.get(k.key) ?? [];
    const journal = (journalByKey.get(k.key) ?? []).sort((a, b) => a.at - b.at);
    const t0 = journal[0]?.at ?? lines[0]?.started ?? 0;
    const from = t0 - 1_000;
    const to = Math.max(journal.at(-1)?.at ?? t0, lines.at(-1)?.received ?? t0) + 1_000;
    const pids = new Set([...journal.map((l) => l.pid), ...lines.map((l) => l.pid)]);
    const rel = (t: number) => `+${t - t0}`;
    const chaos = input.events
      .filter(
        (e) =>
          overlaps(e, from, to) &&
          (e.pid === undefined || pids.has(e.pid) || e.type === 'engine-restart'),
      )
      .map(
        (e) =>
          `${rel(e.from)}${e.to === undefined ? '' : `..${rel(e.to)}`} ms ${e.type}${e.worker ? ` ${e.worker} (pid ${e.pid})` : ''}${e.detail ? `: ${e.detail.slice(0, 160)}` : ''}`,
      );
    const checker = input.checker.get(k.key);
    const plan = [
      k.vendor,
      k.concurrent ? 'concurrent' : '',
      k.lostReply ? 'lost-reply' : '',
      k.targeted ? `targeted ${k.targeted}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    return {
      key: k.key,
      vendor: k.vendor,
      idemKey: k.idemKey,
      plan,
      ...(cause === undefined ? {} : { cause }),
      vendorLog: lines.map(
        (l) =>
          `${rel(l.received)} ms ${l.effect ? 'EFFECT' : 'deduped request'} ${l.id} from ${l.attempt} (pid ${l.pid}; run began ${l.called === undefined ? '?' : rel(l.called)}, tool started ${rel(l.started)}, last check ${rel(l.checked)})${l.slow ? ' reply held past the timeout' : ''}`,
      ),
      journal: journal.map(
        (l) =>
          `${rel(l.at)} ms ${l.worker} (pid ${l.pid}) ${l.ev}${l.attempt ? ` ${l.attempt}` : ''}${l.detail ? `: ${l.detail}` : ''}`,
      ),
      chaos,
      recordBeforeChecker: describeRecord(input.pre.get(k.key), t0),
      recordFinal: describeRecord(input.final.get(k.key), t0),
      checker:
        checker === undefined
          ? 'none'
          : checker.ok
            ? `${checker.outcome} ${checker.id}`
            : `error ${checker.code}: ${checker.message ?? ''}${checker.cause ? ` (cause: ${checker.cause})` : ''}`,
      callers: k.seen.map((s) => `${s.by}: ${s.outcome} ${s.id}`),
    };
  };
  const example = (name: string, k: AnalysisInput['keys'][number], cause?: DuplicateCause) => {
    if (examples[name] === undefined) examples[name] = history(k, cause);
  };

  for (const k of input.keys) {
    const lines = linesByKey.get(k.key) ?? [];
    const effects = lines.filter((l) => l.effect);
    const effectIds = new Set(effects.map((l) => l.id));
    const pre = input.pre.get(k.key);
    const final = input.final.get(k.key);
    const finalId = recordId(final);
    const checker = input.checker.get(k.key);
    const checkerName = checker?.ok ? (checker.outcome ?? 'ok') : (checker?.code ?? 'none');
    checkerOutcomes[checkerName] = (checkerOutcomes[checkerName] ?? 0) + 1;

    if (k.vendor === 'plain') inv.plainEffects += effects.length;
    else {
      inv.dedupeEffects += effects.length;
      inv.dedupeRawRequests += lines.length;
      if (effects.length === 1 && lines.length > 1) inv.dedupeSaved++;
    }
    inv.maxEffectsPerKey = Math.max(inv.maxEffectsPerKey, effects.length);
    const cause = effects.length > 1 ? causeOf(effects) : undefined;
    if (k.targeted !== undefined && k.fired === true) {
      targeted.push({
        key: k.key,
        phase: k.targeted,
        vendor: k.vendor,
        effects: effects.length,
        requests: lines.length,
        ...(cause === undefined ? {} : { cause }),
        history: history(k, cause),
      });
    }
    if (cause !== undefined) {
      inv.keysOverOneEffect++;
      inv.duplicates[k.vendor][cause]++;
      example(`duplicate effect (${k.vendor} vendor, ${cause})`, k, cause);
    }

    if (pre?.state === 'in_progress') inv.inProgressAtSettle++;
    const beforeChecker = lines.filter((l) => l.worker !== 'checker');
    if (pre === undefined && beforeChecker.length === 0) {
      inv.neverRan++;
      if (effects.length > 0) inv.ranByChecker++;
    }

    // The record against the effect.
    if (final?.state === 'in_progress' || (checker !== undefined && !checker.ok)) {
      const reason =
        checker?.code === 'outcome_unknown' && checker.cause !== undefined
          ? "outcome-unknown: reconcile could not tell (the vendor's lookup failed)"
          : `${final?.state ?? 'no record'} after the checker's ${checkerName}`;
      inv.stuck.reasons[reason] = (inv.stuck.reasons[reason] ?? 0) + 1;
      if (reason.startsWith('outcome-unknown')) inv.stuck.explained++;
      else {
        inv.stuck.unexplained++;
        example('stuck without an outcome, unexplained', k);
      }
    } else if (effects.length > 0) {
      if (final === undefined) {
        inv.recordMismatch.missing++;
        example('effect happened, record missing', k);
      } else if (final.state === 'failed') {
        inv.recordMismatch.failed++;
        example('effect happened, record holds a failure', k);
      } else if (finalId === undefined || !effectIds.has(finalId)) {
        inv.recordMismatch.otherOutcome++;
        example('effect happened, record holds another outcome', k);
      }
    } else if (final?.state === 'completed') {
      inv.phantomOutcomes++;
      example('record holds an outcome no effect produced', k);
    }

    // What callers were told.
    const told = new Set(k.seen.map((s) => s.id));
    if (checker?.ok && checker.id !== undefined) told.add(checker.id);
    if (finalId !== undefined) told.add(finalId);
    if (told.size > 1) {
      inv.disagreements++;
      example('callers told different outcomes', k);
    }
    if (k.lostReplyMismatch !== undefined) {
      inv.lostReplyMismatches++;
      example('lost-reply retry did not replay the first outcome', k);
    }
  }

  const failures: string[] = [];
  const fail = (n: number, what: string) => n > 0 && failures.push(`${what}: ${n}`);
  for (const vendor of ['plain', 'dedupe'] as const) {
    for (const [cause, n] of Object.entries(inv.duplicates[vendor])) {
      if (vendor === 'plain' && cause === 'frozen-mid-request') continue;
      fail(n, `keys with >1 effect at the ${vendor} vendor (${cause})`);
    }
  }
  const m = inv.recordMismatch;
  fail(m.missing, 'effect happened, record missing');
  fail(m.failed, 'effect happened, record holds a failure');
  fail(m.otherOutcome, 'effect happened, record holds another outcome');
  fail(inv.phantomOutcomes, 'record holds an outcome no effect produced');
  fail(inv.disagreements, 'callers of one key told different outcomes');
  fail(inv.lostReplyMismatches, 'lost-reply retry did not replay the first outcome');
  fail(inv.stuck.unexplained, 'keys stuck without an outcome, unexplained');
  fail(input.counts.unexpectedExits, 'workers that died by themselves');
  const c = input.counts;
  const downs = restarts.map((e) => (e.to ?? e.from) - e.from);
  const faults: SoakResult['faults'] = {
    kills: c.kills,
    stops: c.stops,
    targetedFreezes: c.targetedFreezes,
    targetedFired: c.targetedFired,
    engineRestarts: c.restarts,
    engineDownMs: {
      mean: Math.round(downs.reduce((a, b) => a + b, 0) / Math.max(1, downs.length)),
      max: Math.max(0, ...downs),
    },
    crashedCalls: c.crashedCalls,
    successors: c.successors,
    retries: c.retries,
    lateRetries: c.lateRetries,
    unexpectedExits: c.unexpectedExits,
    settleKills: c.settleKills,
  };
  for (const note of input.notes) failures.push(note);

  const loadSeconds = input.loadMs / 1000;
  return {
    store: input.store,
    engine: input.engine,
    finishedAt: new Date().toISOString(),
    options: Object.fromEntries(
      Object.entries(input.options).filter(([, v]) => typeof v !== 'function'),
    ),
    keys: input.keys.length,
    calls: input.loadCalls,
    loadSeconds: Math.round(loadSeconds * 10) / 10,
    callsPerSecond: Math.round(input.loadCalls / loadSeconds),
    faults,
    outcomes: c.outcomes,
    checkerOutcomes,
    invariants: inv,
    targeted,
    failures,
    verdict: failures.length === 0 ? 'PASS' : 'FAIL',
    examples,
    notes: input.notes,
    ...(input.dir === undefined ? {} : { dir: input.dir }),
  };
}
