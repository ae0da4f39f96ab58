import { InvalidInputError } from '../errors/index.js';
import { fromBase64, fromUtf8, toBase64, utf8, utf8Length } from '../runtime/index.js';
import type {
  IdempotencyRecord,
  InspectionState,
  ListedRecord,
  ListFilter,
  StatsFilter,
  StoreStats,
} from './store.js';

/** Page sizes of `list`. */
export const LIST_LIMITS = { default: 100, max: 1000 } as const;

/** The states `list` filters on and `stats` counts. */
export const INSPECTION_STATES: readonly InspectionState[] = [
  'in_progress',
  'stale',
  'completed',
  'failed',
];

/** A `ListFilter` checked and with its defaults. */
export interface CheckedListFilter extends StatsFilter {
  state?: InspectionState;
  limit: number;
  cursor?: string;
}

function checkText(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') {
    throw new InvalidInputError({
      field,
      message: `${field} must be a non-empty string, got ${JSON.stringify(value)}.`,
    });
  }
  return value;
}

/** Check a `StatsFilter` (for stores implementing `stats`). */
export function checkStatsFilter(filter: StatsFilter | undefined): StatsFilter {
  if (filter === undefined) return {};
  if (filter === null || typeof filter !== 'object') {
    throw new InvalidInputError({ field: 'filter', message: 'The filter must be an object.' });
  }
  const out: StatsFilter = {};
  const toolName = checkText('toolName', filter.toolName);
  const turnId = checkText('turnId', filter.turnId);
  const scope = checkText('scope', filter.scope);
  if (toolName !== undefined) out.toolName = toolName;
  if (turnId !== undefined) out.turnId = turnId;
  if (scope !== undefined) out.scope = scope;
  return out;
}

/** Check a `ListFilter` and apply its defaults (for stores implementing `list`). */
export function checkListFilter(filter: ListFilter | undefined): CheckedListFilter {
  const out: CheckedListFilter = { ...checkStatsFilter(filter), limit: LIST_LIMITS.default };
  if (filter === undefined) return out;
  if (filter.state !== undefined) {
    if (!INSPECTION_STATES.includes(filter.state)) {
      throw new InvalidInputError({
        field: 'state',
        message: `state must be one of ${INSPECTION_STATES.join(', ')}, got ${JSON.stringify(filter.state)}.`,
      });
    }
    out.state = filter.state;
  }
  if (filter.limit !== undefined) {
    const limit = filter.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMITS.max) {
      throw new InvalidInputError({
        field: 'limit',
        message: `limit must be a whole number from 1 to ${LIST_LIMITS.max}, got ${String(limit)}.`,
      });
    }
    out.limit = limit;
  }
  const cursor = checkText('cursor', filter.cursor);
  if (cursor !== undefined) out.cursor = cursor;
  return out;
}

/** The inspection state of a live record at `now` (the store's clock). */
export function inspectionStateOf(
  record: Pick<IdempotencyRecord, 'state' | 'leaseExpiresAt'>,
  now: number,
): InspectionState {
  if (record.state !== 'in_progress') return record.state;
  return record.leaseExpiresAt <= now ? 'stale' : 'in_progress';
}

/** Whether a live record matches a filter at `now`. */
export function matchesFilter(
  record: Pick<IdempotencyRecord, 'state' | 'leaseExpiresAt' | 'meta'>,
  filter: StatsFilter & { state?: InspectionState | undefined },
  now: number,
): boolean {
  if (filter.toolName !== undefined && record.meta?.toolName !== filter.toolName) return false;
  if (filter.turnId !== undefined && record.meta?.turnId !== filter.turnId) return false;
  if (filter.scope !== undefined && record.meta?.scope !== filter.scope) return false;
  if (filter.state !== undefined && inspectionStateOf(record, now) !== filter.state) return false;
  return true;
}

/** A record as `list` returns it: without its outcome, with its size and inspection state. */
export function toListedRecord(record: IdempotencyRecord, now: number): ListedRecord {
  const { outcome, ...rest } = record;
  const listed: ListedRecord = { ...rest, inspectionState: inspectionStateOf(record, now) };
  if (record.meta !== undefined) listed.meta = { ...record.meta };
  if (outcome !== undefined) listed.outcomeBytes = utf8Length(outcome);
  return listed;
}

/** Empty counters for `stats`, to be filled with `countRecord`. */
export function emptyStats(at: number): StoreStats {
  return { records: 0, inProgress: 0, stale: 0, completed: 0, failed: 0, at };
}

/** Count one record into `stats`. */
export function countRecord(stats: StoreStats, state: InspectionState): void {
  stats.records++;
  if (state === 'in_progress') stats.inProgress++;
  else if (state === 'stale') stats.stale++;
  else if (state === 'completed') stats.completed++;
  else stats.failed++;
}

/** An opaque cursor: base64url JSON of `value`. */
export function encodeCursor(value: unknown): string {
  return toBase64(utf8(JSON.stringify(value)), true);
}

/**
 * Read a cursor made by `encodeCursor`; `check` returns the value, or undefined when its shape is
 * wrong. A cursor that does not decode is an `InvalidInputError`.
 */
export function decodeCursor<T>(cursor: string, check: (value: unknown) => T | undefined): T {
  let value: T | undefined;
  try {
    value = check(JSON.parse(fromUtf8(fromBase64(cursor))));
  } catch {
    value = undefined;
  }
  if (value === undefined) {
    throw new InvalidInputError({
      field: 'cursor',
      message:
        'cursor is not one this store returned. Pass the cursor of the previous page unchanged, or none to start over.',
    });
  }
  return value;
}
