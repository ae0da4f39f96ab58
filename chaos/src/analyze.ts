/**
 * The history checker: the vendors' effect logs (every effect, whatever the workers and the store
 * say) held against what every caller was told and what the store holds, per key. The anomalies
 * (each must be 0):
 *
 * - **duplicate effect**: more than one effect for one key (apart from the limit below);
 * - **wrong replay**: a caller told an outcome that is not this key's effect (another call's), or
 *   two callers of one key told different outcomes;
 * - **lost result**: an effect happened and no caller can ever get its outcome (the record is
 *   missing, a failure, or holds another outcome);
 * - **stuck key**: no outcome, and nothing explains it: the checker's final call fails, or a
 *   caller was told outcome-unknown while nothing had happened to the key's holders, or after the
 *   outcome was known;
 * - **unapproved effect** (approvals): an effect for a call whose approval was rejected.
 *
 * The limits the design names, counted apart with their rates: a process frozen mid-request
 * (after its last ownership check, before the vendor got the request) at a vendor that does not
 * dedupe; outcome-unknown when reconcile cannot tell (no reconcile, or the look-up failed) and a
 * fault explains the stale record (its holder killed, stopped, cut off from the store, or the
 * store or its clock faulted while the call ran).
 */
import type { IdempotencyRecord } from '@idempotent-tools/core';
import {
  type CallReport,
  type ChaosEvent,
  CONFIGS,
  type ConfigName,
  type JournalLine,
  type PlannedKey,
  type Schedule,
  type VendorLine,
  vendorOf,
} from './types.ts';

/** What a caller was told. */
export interface Told {
  by: string;
  /** When the caller was told, and when its call began. */
  at: number;
  startedAt: number;
  ok: boolean;
  id?: string;
  outcome: string;
}

/** What the harness kept of one key. */
export interface KeyRun {
  key: string;
  config: ConfigName;
  told: Told[];
  lostReplyMismatch?: string;
  /** A targeted freeze happened on this key. */
  fired?: boolean;
}

export type CheckerReport = CallReport & { cause?: string };

export type AnomalyKind = 'duplicate' | 'wrong-replay' | 'lost-result' | 'stuck' | 'unapproved';
export const ANOMALY_KINDS: readonly AnomalyKind[] = [
  'duplicate',
  'wrong-replay',
  'lost-result',
  'stuck',
  'unapproved',
];

export interface Anomaly {
  kind: AnomalyKind;
  key: string;
  config: ConfigName;
  detail: string;
}

export interface ConfigCounts {
  keys: number;
  calls: number;
  effects: number;
  duplicate: number;
  'wrong-replay': number;
  'lost-result': number;
  stuck: number;
  unapproved: number;
  /** The limits: duplicates of a holder frozen mid-request (a vendor that does not dedupe). */
  frozenMidRequest: number;
  /** Keys whose final answer is outcome-unknown, explained (reconcile cannot tell). */
  outcomeUnknown: number;
  /** Calls told outcome-unknown during the load, explained. */
  unknownAnswers: number;
}

/** One key's story, for the report of an anomaly. */
export interface KeyHistory {
  key: string;
  config: ConfigName;
  idemKey: string;
  plan: string;
  vendorLog: string[];
  journal: string[];
  chaos: string[];
  recordBeforeChecker: string;
  recordFinal: string;
  checker: string;
  callers: string[];
}

export interface RunResult {
  target: Schedule['target'];
  engine: string;
  seed: number;
  mutation?: string;
  /** Which code ran: the commit, and whether core had uncommitted changes. */
  code?: string;
  finishedAt: string;
  schedule: string;
  keys: number;
  calls: number;
  loadSeconds: number;
  faults: Record<string, number>;
  skippedFaults: number;
  perConfig: Partial<Record<ConfigName, ConfigCounts>>;
  totals: ConfigCounts;
  anomalies: Anomaly[];
  examples: Partial<Record<AnomalyKind | 'frozen-mid-request' | 'outcome-unknown', KeyHistory>>;
  unexpectedExits: number;
  failures: string[];
  verdict: 'PASS' | 'FAIL';
  notes: string[];
  dir?: string;
}

export interface AnalysisInput {
  schedule: Schedule;
  engine: string;
  lease: number;
  keys: (KeyRun & {
    plan: PlannedKey;
    idemKey: string;
    pre: IdempotencyRecord | undefined;
    final: IdempotencyRecord | undefined;
    checker: CheckerReport;
  })[];
  vendorLines: VendorLine[];
  journal: JournalLine[];
  events: ChaosEvent[];
  loadMs: number;
  loadCalls: number;
  counts: {
    unexpectedExits: number;
    settleKills: number;
    skippedFaults: number;
    fired: Record<string, number>;
  };
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

/**
 * The vendor id a record's stored outcome holds: `{"v":{"id":...}}` for a tool, the stored
 * response's JSON body (base64) for the HTTP handler. Outcomes are not encrypted here.
 */
export function recordId(record: IdempotencyRecord | undefined): string | undefined {
  if (record?.outcome === undefined || record.state !== 'completed') return undefined;
  try {
    const parsed = JSON.parse(record.outcome) as { v?: { id?: unknown; body?: unknown } };
    if (typeof parsed.v?.id === 'string') return parsed.v.id;
    if (typeof parsed.v?.body === 'string') {
      const body = JSON.parse(Buffer.from(parsed.v.body, 'base64').toString('utf8')) as {
        id?: unknown;
      };
      return typeof body.id === 'string' ? body.id : undefined;
    }
    return undefined;
  } catch {
    return undefined;
  }
}

function describeRecord(record: IdempotencyRecord | undefined, t0: number): string {
  if (record === undefined) return 'none';
  const parts = [`${record.state}`, `token ${record.token.slice(0, 8)}`];
  parts.push(`created +${record.createdAt - t0} ms`);
  if (record.state === 'in_progress') parts.push(`lease until +${record.leaseExpiresAt - t0} ms`);
  const id = recordId(record);
  if (id !== undefined) parts.push(`outcome ${id}`);
  else if (record.outcome !== undefined) parts.push(`outcome ${record.outcome.slice(0, 120)}`);
  return parts.join(', ');
}

const zero = (): ConfigCounts => ({
  keys: 0,
  calls: 0,
  effects: 0,
  duplicate: 0,
  'wrong-replay': 0,
  'lost-result': 0,
  stuck: 0,
  unapproved: 0,
  frozenMidRequest: 0,
  outcomeUnknown: 0,
  unknownAnswers: 0,
});

/** Configurations whose stale record nothing can settle: outcome-unknown is their answer. */
const CANNOT_TELL = new Set<ConfigName>(['fetch', 'idempotentFetch', 'httpHandler', 'approvals']);
/**
 * Answers that say "the effect may have happened, it is not run again": the executor's
 * outcome-unknown, and the HTTP handler's `request_failed` (the handler threw after it started:
 * kept, answered 500 on every retry).
 */
const UNKNOWN = new Set(['outcome_unknown', 'request_failed']);
const slotOf = (worker: string) => Number(/^w(\d+)\./.exec(worker)?.[1] ?? -1);

export function analyze(input: AnalysisInput): RunResult {
  const linesByKey = group(input.vendorLines, (l) => l.key);
  const journalByKey = group(input.journal, (l) => l.key);
  const byPid = group(
    input.events.filter((e) => e.pid !== undefined),
    (e) => String(e.pid),
  );
  const overlaps = (e: ChaosEvent, from: number, to: number) =>
    e.from <= to && (e.to ?? Number.POSITIVE_INFINITY) >= from;
  const stopsOf = (pid: number) =>
    (byPid.get(String(pid)) ?? []).filter((e) => e.type === 'stop' || e.type === 'targeted-freeze');
  const storeFaults = input.events.filter(
    (e) =>
      e.type === 'outage' ||
      e.type === 'engine-restart' ||
      e.type === 'proxy' ||
      e.type === 'clock' ||
      (e.type === 'vendor' && e.detail?.startsWith('replies held') === true),
  );

  /**
   * What explains a stale record of `key` seen by a call at `t` (undefined: nothing): one of the
   * calls of the key before `t` ran on a worker killed or stopped meanwhile, failed, or a fault of
   * the store, of the path to it, of a clock or a slow vendor overlapped them.
   */
  const explain = (k: AnalysisInput['keys'][number], t: number): string | undefined => {
    if (k.plan.freeze !== undefined) return `targeted freeze ${k.plan.freeze}`;
    const starts = (journalByKey.get(k.key) ?? []).filter(
      (l) => l.ev === 'call' && l.worker !== 'checker' && l.at <= t,
    );
    if (starts.length === 0) return undefined;
    const first = Math.min(...starts.map((l) => l.at)) - input.lease;
    for (const start of starts) {
      const hit = (byPid.get(String(start.pid)) ?? []).find(
        (e) =>
          (e.type === 'kill' || e.type === 'stop' || e.type === 'targeted-freeze') &&
          e.detail?.startsWith('skipped') !== true &&
          overlaps(e, start.at, t),
      );
      if (hit !== undefined) return `${hit.type} of ${hit.worker}`;
    }
    const failed = k.told.find((c) => !c.ok && c.at < t && !UNKNOWN.has(c.outcome));
    if (failed !== undefined) return `an earlier call failed (${failed.outcome})`;
    const slots = new Set(starts.map((l) => slotOf(l.worker)));
    const fault = storeFaults.find(
      (e) =>
        overlaps(e, first, t) &&
        (e.slot === undefined || e.slot === 'all' || slots.has(e.slot as number)),
    );
    if (fault !== undefined) return `${fault.type}: ${fault.detail ?? ''}`;
    return undefined;
  };

  const perConfig: Partial<Record<ConfigName, ConfigCounts>> = {};
  const anomalies: Anomaly[] = [];
  const examples: RunResult['examples'] = {};

  const history = (k: AnalysisInput['keys'][number]): KeyHistory => {
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
          (e.pid === undefined || pids.has(e.pid)) &&
          e.detail?.startsWith('skipped') !== true,
      )
      .map(
        (e) =>
          `${rel(e.from)}${e.to === undefined ? '' : `..${rel(e.to)}`} ms ${e.type}${e.worker ? ` ${e.worker} (pid ${e.pid})` : ''}${e.detail ? `: ${e.detail.slice(0, 160)}` : ''}`,
      );
    const c = k.checker;
    const plan = [
      k.config,
      k.plan.slots.length > 1 ? `concurrent x${k.plan.slots.length}` : '',
      k.plan.lostReply ? 'lost-reply' : '',
      k.plan.decision ? `decision ${k.plan.decision}` : '',
      k.plan.freeze ? `targeted ${k.plan.freeze}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    return {
      key: k.key,
      config: k.config,
      idemKey: k.idemKey,
      plan,
      vendorLog: lines.map(
        (l) =>
          `${rel(l.received)} ms ${l.effect ? 'EFFECT' : 'deduped request'} ${l.id} from ${l.attempt} (pid ${l.pid}; run began ${l.called === undefined ? '?' : rel(l.called)}, tool started ${rel(l.started)}, last check ${rel(l.checked)}, committed ${rel(l.committed)})${l.slow ? ', reply held past the timeout' : ''}`,
      ),
      journal: journal.map(
        (l) =>
          `${rel(l.at)} ms ${l.worker} (pid ${l.pid}) ${l.ev}${l.attempt ? ` ${l.attempt}` : ''}${l.detail ? `: ${l.detail}` : ''}`,
      ),
      chaos,
      recordBeforeChecker: describeRecord(k.pre, t0),
      recordFinal: describeRecord(k.final, t0),
      checker: c.ok
        ? `${c.outcome} ${c.id ?? ''}`
        : `error ${c.code}: ${c.message ?? ''}${c.cause ? ` (cause: ${c.cause})` : ''}`,
      callers: k.told.map((s) => `${rel(s.at)} ms ${s.by}: ${s.outcome} ${s.id ?? ''}`),
    };
  };

  for (const k of input.keys) {
    const counts = perConfig[k.config] ?? zero();
    perConfig[k.config] = counts;
    counts.keys++;
    counts.calls += k.told.length;
    const found = (kind: AnomalyKind, detail: string) => {
      counts[kind]++;
      anomalies.push({ kind, key: k.key, config: k.config, detail });
      if (examples[kind] === undefined) examples[kind] = history(k);
    };
    const lines = linesByKey.get(k.key) ?? [];
    const effects = lines.filter((l) => l.effect);
    counts.effects += effects.length;
    const effectIds = new Set(effects.map((l) => l.id));

    // Duplicate effects.
    if (effects.length > 1) {
      const midRequest = effects.some((l) =>
        stopsOf(l.pid).some((e) => overlaps(e, l.checked, l.received)),
      );
      const stalled = effects.some((l) =>
        stopsOf(l.pid).some((e) => overlaps(e, l.called ?? l.started, l.checked)),
      );
      if (midRequest && vendorOf(k.config) === 'plain') {
        counts.frozenMidRequest++;
        if (examples['frozen-mid-request'] === undefined)
          examples['frozen-mid-request'] = history(k);
      } else {
        found(
          'duplicate',
          `${effects.length} effects (${[...effectIds].join(', ')})${midRequest ? ', a holder frozen mid-request' : stalled ? ', a holder stalled before its check' : ''}`,
        );
      }
    }
    if (k.plan.decision === 'reject' && effects.length > 0) {
      found('unapproved', `${effects.length} effect(s) of a call whose approval was rejected`);
    }

    // What callers were told.
    const told = k.told.filter((c) => c.ok && c.id !== undefined).map((c) => c.id!);
    if (k.checker.ok && k.checker.id !== undefined) told.push(k.checker.id);
    const finalId = recordId(k.final);
    const foreign = told.filter((id) => !effectIds.has(id));
    const distinct = new Set(told);
    if (foreign.length > 0) {
      found('wrong-replay', `told ${[...new Set(foreign)].join(', ')}, not an effect of this key`);
    } else if (distinct.size > 1) {
      found('wrong-replay', `callers told different outcomes: ${[...distinct].join(', ')}`);
    } else if (k.lostReplyMismatch !== undefined) {
      found('wrong-replay', `the lost-reply retry: ${k.lostReplyMismatch}`);
    }
    const rejected = k.told.some((c) => c.outcome === 'rejected');
    if (rejected && told.length > 0) {
      found('wrong-replay', 'a rejected approval, and a caller told an outcome');
    }

    // Outcome-unknown told during the load: explained, or not.
    const known = k.told.find((c) => c.ok);
    for (const c of k.told) {
      if (!UNKNOWN.has(c.outcome)) continue;
      if (known !== undefined && known.at < c.startedAt) {
        found('stuck', `${c.by} told outcome-unknown after ${known.by} got the outcome`);
        break;
      }
      if (explain(k, c.at) === undefined) {
        found(
          'stuck',
          `${c.by} told outcome-unknown while nothing had happened to the key's holders`,
        );
        break;
      }
      counts.unknownAnswers++;
    }

    // The end: the checker's answer against the effects and the record.
    const c = k.checker;
    if (c.ok) {
      // Held against the effects above (a wrong replay) and below (a lost result).
    } else if (UNKNOWN.has(c.code ?? '')) {
      const why = explain(k, Number.POSITIVE_INFINITY);
      if (CANNOT_TELL.has(k.config) && why !== undefined) {
        counts.outcomeUnknown++;
        if (examples['outcome-unknown'] === undefined) examples['outcome-unknown'] = history(k);
      } else {
        found(
          'stuck',
          CANNOT_TELL.has(k.config)
            ? 'outcome-unknown at the end, and nothing explains the stale record'
            : `outcome-unknown at the end under ${k.config}, which can tell (the vendor is healthy)`,
        );
      }
    } else {
      found('stuck', `the checker's call failed: ${c.code}: ${(c.message ?? '').slice(0, 160)}`);
    }
    // A lost result: an effect happened, and the last caller did not get it, nor does the record
    // hold it (outcome-unknown is the limit above, or stuck).
    const gotIt = c.ok && effectIds.has(c.id ?? '');
    const holdsIt =
      k.final?.state === 'completed' && finalId !== undefined && effectIds.has(finalId);
    if (effects.length > 0 && !UNKNOWN.has(c.code ?? '') && !gotIt && !holdsIt) {
      const state = k.final === undefined ? 'no record' : `record ${k.final.state}`;
      found(
        'lost-result',
        `${effects.length} effect(s), ${state}, the checker: ${c.ok ? `${c.outcome} ${c.id ?? ''}` : c.code}`,
      );
    }
  }

  const totals = zero();
  for (const config of CONFIGS) {
    const c = perConfig[config];
    if (c === undefined) continue;
    for (const name of Object.keys(totals) as (keyof ConfigCounts)[]) totals[name] += c[name];
  }
  const failures: string[] = [];
  for (const kind of ANOMALY_KINDS) {
    if (totals[kind] > 0) failures.push(`${kind}: ${totals[kind]}`);
  }
  if (input.counts.unexpectedExits > 0) {
    failures.push(`workers that died by themselves: ${input.counts.unexpectedExits}`);
  }
  for (const note of input.notes) failures.push(note);
  const s = input.schedule;
  return {
    target: s.target,
    engine: input.engine,
    seed: s.seed,
    ...(s.mutation === undefined ? {} : { mutation: s.mutation }),
    finishedAt: new Date().toISOString(),
    schedule: '',
    keys: input.keys.length,
    calls: input.loadCalls,
    loadSeconds: Math.round(input.loadMs / 100) / 10,
    faults: input.counts.fired,
    skippedFaults: input.counts.skippedFaults,
    perConfig,
    totals,
    anomalies,
    examples,
    unexpectedExits: input.counts.unexpectedExits,
    failures,
    verdict: failures.length === 0 ? 'PASS' : 'FAIL',
    notes: input.notes,
    ...(input.dir === undefined ? {} : { dir: input.dir }),
  };
}
