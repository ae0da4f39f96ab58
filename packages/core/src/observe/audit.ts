import { InvalidInputError } from '../errors/index.js';
import {
  CALL_OUTCOMES,
  type CallOutcome,
  type EventHandler,
  type IdempotencyEvent,
  isReplay,
} from './events.js';

/**
 * The durable audit trail's contract (implemented by `createSqliteAuditLog` in
 * `@idempotent-tools/store-sqlite` and `createPostgresAuditLog` in
 * `@idempotent-tools/store-postgres`): an append-only log of events, bounded by a retention, with
 * a reader. It never holds raw args or results (only `argsFingerprint`, `argsBytes`,
 * `resultBytes`), even when events carry them.
 */
export interface AuditLog {
  /** The sink: buffers the event for a batched insert (never blocks a call, never throws). */
  readonly onEvent: EventHandler;
  /** Write every buffered event now. */
  flush(): Promise<void>;
  /** Events newest first, one page at a time. */
  query(query?: AuditQuery): Promise<AuditPage>;
  /** Calls, replays and the replay rate over a time range. */
  stats(filter?: AuditStatsFilter): Promise<AuditStats>;
  /** Delete events older than the retention now; returns how many were removed. */
  purgeExpired(): Promise<number>;
  /** Flush and stop (later events are dropped). Never closes your connection or pool. */
  close(): Promise<void>;
  /** How long events are kept, in ms. */
  readonly retentionMs: number;
  /** Events not written yet. */
  readonly pending: number;
  /** Events lost: buffer full, failed writes, or sent after `close`. */
  readonly dropped: number;
}

/** Which events `stats` counts. */
export interface AuditStatsFilter {
  toolName?: string;
  scope?: string;
  turnId?: string;
  /** Events that ended at or after this time (ms since the epoch). @default retention start */
  since?: number;
  /** Events that ended before this time (ms since the epoch). @default no bound */
  until?: number;
}

/** Which events `query` returns. */
export interface AuditQuery extends AuditStatsFilter {
  key?: string;
  outcome?: CallOutcome;
  /** Most events in one page, 1 to 1000. @default 100 */
  limit?: number;
  /** The `cursor` of the previous page. */
  cursor?: string;
}

/** One stored event (never with raw args). */
export interface AuditEntry extends Omit<IdempotencyEvent, 'args'> {
  /** Position in the log: later events have larger ids. */
  id: number;
}

export interface AuditPage {
  events: AuditEntry[];
  /** Pass it to the next `query`; undefined on the last page. */
  cursor?: string;
}

export interface AuditStats {
  calls: number;
  /** Calls that returned a stored outcome (`isReplay`). */
  replays: number;
  /** `replays / calls`, 0 without calls. */
  replayRate: number;
  byOutcome: Record<CallOutcome, number>;
  since: number | undefined;
  until: number | undefined;
}

/** The default retention of the audit logs: 7 days. */
export const DEFAULT_AUDIT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** An `AuditQuery` checked and with its defaults. */
export interface CheckedAuditQuery extends AuditQuery {
  limit: number;
}

function checkTime(field: string, value: unknown): void {
  if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value))) {
    throw new InvalidInputError({
      field,
      message: `${field} must be a time in ms since the epoch, got ${String(value)}.`,
    });
  }
}

/** Check an `AuditStatsFilter` (for audit log implementations). */
export function checkAuditStatsFilter(filter: AuditStatsFilter | undefined): AuditStatsFilter {
  if (filter === undefined) return {};
  if (filter === null || typeof filter !== 'object') {
    throw new InvalidInputError({ field: 'filter', message: 'The filter must be an object.' });
  }
  for (const field of ['toolName', 'scope', 'turnId'] as const) {
    const value = filter[field];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new InvalidInputError({ field, message: `${field} must be a non-empty string.` });
    }
  }
  checkTime('since', filter.since);
  checkTime('until', filter.until);
  return filter;
}

/** Check an `AuditQuery` and apply its defaults (for audit log implementations). */
export function checkAuditQuery(query: AuditQuery | undefined): CheckedAuditQuery {
  const checked: CheckedAuditQuery = { ...checkAuditStatsFilter(query), limit: 100 };
  if (query === undefined) return checked;
  for (const field of ['key'] as const) {
    const value = query[field];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new InvalidInputError({ field, message: `${field} must be a non-empty string.` });
    }
  }
  if (query.outcome !== undefined && !CALL_OUTCOMES.includes(query.outcome)) {
    throw new InvalidInputError({
      field: 'outcome',
      message: `outcome must be one of ${CALL_OUTCOMES.join(', ')}, got ${JSON.stringify(query.outcome)}.`,
    });
  }
  if (query.limit !== undefined) {
    if (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > 1000) {
      throw new InvalidInputError({
        field: 'limit',
        message: `limit must be a whole number from 1 to 1000, got ${String(query.limit)}.`,
      });
    }
    checked.limit = query.limit;
  }
  return checked;
}

/** A row of an audit table (snake_case columns), as both SQL stores lay it out. */
export interface AuditRow {
  id: number | bigint | string;
  key: string;
  tool_name: string;
  scope: string | null;
  turn_id: string | null;
  outcome: string;
  store: string;
  started_at: number | bigint | string;
  ended_at: number | bigint | string;
  duration_ms: number | bigint | string;
  waited_ms: number | bigint | string | null;
  error_code: string | null;
  args_fingerprint: string;
  args_bytes: number | bigint | string;
  result_bytes: number | bigint | string | null;
}

/** The columns of an audit table, in the order of `auditRowValues`. */
export const AUDIT_COLUMNS = [
  'key',
  'tool_name',
  'scope',
  'turn_id',
  'outcome',
  'store',
  'started_at',
  'ended_at',
  'duration_ms',
  'waited_ms',
  'error_code',
  'args_fingerprint',
  'args_bytes',
  'result_bytes',
] as const;

/** The values of one event for `AUDIT_COLUMNS` (never the raw args). */
export function auditRowValues(event: IdempotencyEvent): Array<string | number | null> {
  return [
    event.key,
    event.toolName,
    event.scope ?? null,
    event.turnId ?? null,
    event.outcome,
    event.store,
    event.startedAt,
    event.endedAt,
    event.durationMs,
    event.waitedMs ?? null,
    event.errorCode ?? null,
    event.argsFingerprint,
    event.argsBytes,
    event.resultBytes ?? null,
  ];
}

/** An operator's settlement (`outcome: 'settled'`), as the `operator` column keeps it. */
type Operator = NonNullable<IdempotencyEvent['operator']>;

/** The `operator` column's value of an event: its settlement as JSON text, or null. */
export function auditOperatorJson(event: IdempotencyEvent): string | null {
  const op = event.operator;
  if (op == null) return null;
  return JSON.stringify({
    by: String(op.by),
    reason: String(op.reason),
    action: String(op.action),
  });
}

/** A stored `operator` (JSON text, or a value a driver parsed) back to the event's. */
function operatorFrom(raw: unknown): Operator | undefined {
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      return undefined;
    }
  }
  const op = value as Partial<Operator> | null | undefined;
  return op != null &&
    typeof op === 'object' &&
    typeof op.by === 'string' &&
    typeof op.reason === 'string' &&
    (op.action === 'completed' || op.action === 'released')
    ? { by: op.by, reason: op.reason, action: op.action }
    : undefined;
}

/** A stored row back to an entry (`operator`: the settlement column, when the table has it). */
export function auditEntryFromRow(row: AuditRow & { operator?: unknown }): AuditEntry {
  const entry: AuditEntry = {
    id: Number(row.id),
    key: row.key,
    toolName: row.tool_name,
    scope: row.scope ?? undefined,
    turnId: row.turn_id ?? undefined,
    outcome: row.outcome as CallOutcome,
    store: row.store,
    startedAt: Number(row.started_at),
    endedAt: Number(row.ended_at),
    durationMs: Number(row.duration_ms),
    argsFingerprint: row.args_fingerprint,
    argsBytes: Number(row.args_bytes),
  };
  if (row.waited_ms !== null) entry.waitedMs = Number(row.waited_ms);
  if (row.error_code !== null) entry.errorCode = row.error_code;
  if (row.result_bytes !== null) entry.resultBytes = Number(row.result_bytes);
  const operator = operatorFrom(row.operator ?? null);
  if (operator !== undefined) entry.operator = operator;
  return entry;
}

/**
 * Stats from counts per outcome (`replayedFailures`: the `failed` events whose error code is
 * `replayed_failure`). A settlement (`settled`, an operator's decision) is not a call: `calls`,
 * `replays` and `replayRate` leave it out; `byOutcome.settled` counts settlements.
 */
export function auditStatsFrom(
  counts: ReadonlyArray<{ outcome: string; count: number; replayedFailures: number }>,
  filter: AuditStatsFilter,
): AuditStats {
  const byOutcome = Object.fromEntries(CALL_OUTCOMES.map((o) => [o, 0])) as Record<
    CallOutcome,
    number
  >;
  let calls = 0;
  let replays = 0;
  for (const { outcome, count, replayedFailures } of counts) {
    if (outcome in byOutcome) byOutcome[outcome as CallOutcome] += count;
    if (outcome === 'settled') continue;
    calls += count;
    if (isReplay({ outcome: outcome as CallOutcome })) replays += count;
    else if (outcome === 'failed') replays += replayedFailures;
  }
  return {
    calls,
    replays,
    replayRate: calls === 0 ? 0 : replays / calls,
    byOutcome,
    since: filter.since,
    until: filter.until,
  };
}
