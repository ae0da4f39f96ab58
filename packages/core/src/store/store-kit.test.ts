import { describe, expect, test } from 'vitest';
import { InvalidInputError } from '../errors/index.js';
import type { AuditPage, AuditStats, AuditStatsFilter } from '../observe/audit.js';
import type { IdempotencyEvent } from '../observe/events.js';
import { decodeCursor } from './inspection.js';
import {
  type AuditQueryConditions,
  BatchedAuditLog,
  checkClock,
  checkOneOf,
  checkWholeNumber,
  cursorId,
  cursorKey,
  filterColumns,
  InFlight,
  inspectionWhere,
  pageOf,
  recordFromRow,
  recordRowProblem,
  statsFromRow,
} from './store-kit.js';

function refusal(run: () => unknown): InvalidInputError {
  try {
    run();
  } catch (error) {
    if (InvalidInputError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('not refused');
}

describe('store-kit: options', () => {
  test('checkWholeNumber takes whole numbers in range and names the field otherwise', () => {
    expect(checkWholeNumber('n', 0, 0)).toBe(0);
    expect(checkWholeNumber('n', 10, 1, 10)).toBe(10);
    for (const [value, max] of [[-1], [1.5], ['3'], [Number.NaN], [2 ** 60], [11, 10]] as const) {
      const error = refusal(() => checkWholeNumber('n', value, 0, max));
      expect(error.field).toBe('n');
      expect(error.message).toMatch(/^n must be a whole number (>= 0|between 0 and 10), got /);
    }
  });

  test('checkOneOf lists the choices', () => {
    expect(checkOneOf('mode', 'b', ['a', 'b', 'c'])).toBe('b');
    const error = refusal(() => checkOneOf('mode', 'x', ['a', 'b', 'c']));
    expect(error.field).toBe('mode');
    expect(error.message).toBe("mode must be 'a', 'b' or 'c', got x.");
  });

  test('checkClock: Date.now by default, a function kept, anything else refused', () => {
    const now = () => 5;
    expect(checkClock(undefined)).toBe(Date.now);
    expect(checkClock(now)).toBe(now);
    expect(refusal(() => checkClock(5)).field).toBe('now');
  });
});

describe('store-kit: InFlight', () => {
  test('shares the request in flight for a key until it settles; a failure answers undefined', async () => {
    const inFlight = new InFlight<string>();
    let resolve!: (value: string) => void;
    const first = inFlight.track('k', new Promise<string>((r) => (resolve = r)));
    const second = inFlight.track('k', Promise.resolve('second'));
    expect(inFlight.has('k')).toBe(true);
    const shared = inFlight.answer('k');
    resolve('first');
    expect(await first).toBe('first');
    expect(await second).toBe('second');
    expect(await shared).toBe('first');
    await Promise.resolve();
    expect(inFlight.has('k')).toBe(false);

    const failing = inFlight.track('f', Promise.reject(new Error('down')));
    const answer = inFlight.answer('f');
    await expect(failing).rejects.toThrow('down');
    expect(await answer).toBeUndefined();
  });
});

describe('store-kit: SQL rows', () => {
  const row = {
    key: 'k',
    state: 'completed',
    fingerprint: 'fp',
    token: 't',
    lease_expires_at: 10,
    expires_at: 20,
    created_at: 1,
    completed_at: 5,
    outcome: '"ok"',
    tool_name: 'tool',
    scope: null,
    turn_id: 'turn',
  };
  const isTime = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v);

  test('a row the store wrote becomes its record', () => {
    expect(recordRowProblem(row, isTime)).toBeUndefined();
    expect(recordFromRow(row)).toEqual({
      key: 'k',
      state: 'completed',
      fingerprint: 'fp',
      token: 't',
      leaseExpiresAt: 10,
      expiresAt: 20,
      createdAt: 1,
      completedAt: 5,
      outcome: '"ok"',
      meta: { toolName: 'tool', turnId: 'turn' },
    });
    const { completed_at: _c, outcome: _o, tool_name: _t, turn_id: _u, ...running } = row;
    expect(recordFromRow({ ...running, state: 'in_progress' }).meta).toBeUndefined();
  });

  test('any other row names its problem', () => {
    expect(recordRowProblem({ ...row, state: 'done' }, isTime)).toBe('an unknown state');
    expect(recordRowProblem({ ...row, token: 7 }, isTime)).toMatch(/token that is not text/);
    expect(recordRowProblem({ ...row, created_at: '1' }, isTime)).toMatch(/time/);
    expect(recordRowProblem({ ...row, completed_at: 1.5 }, isTime)).toMatch(/completion time/);
    expect(recordRowProblem({ ...row, outcome: null }, isTime)).toMatch(/without its outcome/);
    expect(recordRowProblem({ ...row, scope: 3 }, isTime)).toMatch(/meta that is not text/);
  });

  test('filterColumns: the meta columns a filter sets', () => {
    expect(filterColumns({})).toEqual([]);
    expect(filterColumns({ scope: 's', toolName: 't' })).toEqual([
      ['tool_name', 't'],
      ['scope', 's'],
    ]);
  });

  test('inspectionWhere: live rows, the meta columns, and the inspection state', () => {
    expect(inspectionWhere({}, 5)).toEqual({ where: ['expires_at > ?'], params: [5] });
    expect(inspectionWhere({ toolName: 't', state: 'stale' }, 5)).toEqual({
      where: ['expires_at > ?', 'tool_name = ?', "state = 'in_progress' AND lease_expires_at <= ?"],
      params: [5, 't', 5],
    });
    expect(inspectionWhere({ state: 'in_progress' }, 7).where[1]).toBe(
      "state = 'in_progress' AND lease_expires_at > ?",
    );
    expect(inspectionWhere({ scope: 's', state: 'completed' }, 7)).toEqual({
      where: ['expires_at > ?', 'scope = ?', 'state = ?'],
      params: [7, 's', 'completed'],
    });
  });

  test('statsFromRow reads the counts', () => {
    const counts = { records: 5n, in_progress: 1, stale: '1', completed: 2, failed: 1 };
    expect(statsFromRow(counts, 9)).toEqual({
      records: 5,
      inProgress: 1,
      stale: 1,
      completed: 2,
      failed: 1,
      at: 9,
    });
  });
});

describe('store-kit: pages', () => {
  test('a cursor only when a row beyond the limit was read', () => {
    const double = (n: number) => n * 2;
    expect(pageOf('items', [1, 2], 2, double, (n) => n)).toEqual({ items: [2, 4] });
    const page = pageOf('items', [1, 2, 3], 2, double, (n) => `after-${n}`);
    expect(page.items).toEqual([2, 4]);
    expect(cursorKey(page.cursor)).toBe('after-4');
    expect(cursorKey(undefined)).toBeUndefined();
    expect(
      cursorId(
        pageOf(
          'ids',
          [7, 6, 5],
          2,
          (n) => n,
          (n) => n,
        ).cursor,
      ),
    ).toBe(6);
    expect(() => cursorId(page.cursor)).toThrow();
    expect(decodeCursor(page.cursor!, (v) => v)).toBe('after-4');
  });
});

/** An event of a call that ended at `i`; with `operator`, an operator's settlement. */
function event(i: number, operator?: IdempotencyEvent['operator']): IdempotencyEvent {
  const call = { key: `k${i}`, toolName: 't', scope: undefined, turnId: 'x', store: 'memory' };
  const times = { startedAt: i, endedAt: i, durationMs: 0 };
  const args = { argsFingerprint: 'fp', argsBytes: 2 };
  return operator === undefined
    ? { ...call, ...times, ...args, outcome: 'executed' }
    : { ...call, ...times, ...args, outcome: 'settled', operator };
}

/** A log that keeps its batches in memory, a table without an operator column. */
class ArrayAuditLog extends BatchedAuditLog {
  readonly written: IdempotencyEvent[][] = [];
  sweeps = 0;
  async query(): Promise<AuditPage> {
    return { events: [] };
  }
  async stats(): Promise<AuditStats> {
    return this.statsOf([], {});
  }
  async purgeExpired(): Promise<number> {
    return 0;
  }
  protected writeBatch(batch: IdempotencyEvent[]): void {
    this.written.push(this.withoutOperators(batch, (n) => `${n} without their operator`));
    if (this.sweepDue()) this.sweeps++;
  }
  whereOf(
    filter: AuditStatsFilter,
    placeholder: (n: number) => string,
    query?: AuditQueryConditions,
  ) {
    return this.where(filter, placeholder, query);
  }
}

describe('store-kit: BatchedAuditLog', () => {
  test('batches, retention, operator events left out and counted, one sweep a minute', async () => {
    let now = 1_000_000;
    const errors: unknown[] = [];
    const log = new ArrayAuditLog({
      retentionMs: 1000,
      batchSize: 2,
      now: () => now,
      onError: (error) => errors.push(error),
    });
    log.onEvent(event(1));
    log.onEvent(event(2, { by: 'ops', reason: 'checked', action: 'completed' }));
    log.onEvent(event(3));
    await log.flush();
    expect(log.written.flat().map((e) => e.key)).toEqual(['k1', 'k3']);
    expect(log.dropped).toBe(1);
    expect(log.pending).toBe(0);
    expect(String(errors[0])).toMatch(/1 without their operator/);
    expect(log.sweeps).toBe(1);
    now += 60_000;
    log.onEvent(event(4));
    await log.close();
    expect(log.sweeps).toBe(2);
    expect(refusal(() => new ArrayAuditLog({ retentionMs: 0 })).field).toBe('retentionMs');
  });

  test('where: the retention, the filter, then the query conditions, numbered by the dialect', () => {
    const log = new ArrayAuditLog({ retentionMs: 100, now: () => 1000 });
    expect(
      log.whereOf({ since: 5, toolName: 't' }, (n) => `$${n}`, { outcome: 'executed', before: 9 }),
    ).toEqual({
      where: ['ended_at > $1', 'ended_at >= $2', 'tool_name = $3', 'outcome = $4', 'id < $5'],
      values: [900, 5, 't', 'executed', 9],
    });
    expect(log.whereOf({}, () => '?')).toEqual({ where: ['ended_at > ?'], values: [900] });
  });
});
