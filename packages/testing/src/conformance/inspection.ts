import { randomUUID } from 'node:crypto';
import {
  type IdempotencyStore,
  InvalidInputError,
  type ListedRecord,
  type ListFilter,
  type RecordPage,
} from '@idempotent-tools/core';
import type { TestClock } from '../clock.js';
import type { ConformanceContext } from './types.js';

/** `list` and `stats` (optional): live records by state and filter, pages, bad filters refused. */
export function defineInspectionTests<S extends IdempotencyStore>(
  ctx: ConformanceContext<S>,
): void {
  const { describe, expect, define, ms, LEASE } = ctx;
  const { key, claimInput, acquire, mustGet, complete, expectStoreTime } = ctx.fixture;

  describe('inspection (list, stats: optional)', () => {
    /**
     * Records of one tool in every inspection state, plus an expired one, one of another tool
     * and one without meta. Returns their keys; the stale one's lease has run out.
     */
    const populate = async (store: S, clock: TestClock) => {
      const base = key('inspect');
      const tool = `inspect-${randomUUID()}`;
      const k = {
        completed: `${base}-completed`,
        failed: `${base}-failed`,
        running: `${base}-running`,
        stale: `${base}-stale`,
        expired: `${base}-expired`,
        other: `${base}{other}*?[`,
        bare: `${base}-bare`,
      };
      const meta = (turnId: string, scope: string) => ({ toolName: tool, turnId, scope });
      const completed = claimInput(k.completed, { meta: meta('turn-a', 's1') });
      const failed = claimInput(k.failed, { meta: meta('turn-b', 's1') });
      const running = claimInput(k.running, { meta: meta('turn-a', 's2') });
      const stale = claimInput(k.stale, { leaseMs: LEASE, meta: meta('turn-c', 's1') });
      const expired = claimInput(k.expired, {
        leaseMs: ms(50),
        ttlMs: ms(50),
        meta: meta('turn-a', 's1'),
      });
      const other = claimInput(k.other, { meta: { toolName: `${tool}-other` } });
      const bare = claimInput(k.bare);
      for (const input of [completed, failed, running, stale, expired, other, bare]) {
        await acquire(store, input);
      }
      await complete(store, k.completed, completed.token, 'completed', '{"ok":"é"}');
      await complete(store, k.failed, failed.token, 'failed', '{"e":1}');
      await complete(store, k.other, other.token, 'completed', '1');
      await clock.advance(ms(150));
      return { tool, k };
    };

    /** Every page of `filter`; checks page sizes and that no key comes twice. */
    const listAll = async (store: S, filter: ListFilter = {}): Promise<ListedRecord[]> => {
      const list = store.list!.bind(store);
      const records: ListedRecord[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 10_000; pages++) {
        const page: RecordPage = await list({
          ...filter,
          ...(cursor === undefined ? {} : { cursor }),
        });
        expect(page.records.length).toBeLessThanOrEqual(filter.limit ?? 100);
        records.push(...page.records);
        cursor = page.cursor;
        if (cursor === undefined) break;
        expect(typeof cursor).toBe('string');
      }
      expect(cursor).toBeUndefined();
      expect(new Set(records.map((r) => r.key)).size).toBe(records.length);
      return records;
    };
    const keysOf = (records: readonly ListedRecord[]) => records.map((r) => r.key).sort();

    define(
      'list (when present) returns live records without outcomes, filtered by tool, turn, scope and state',
      async ({ store, clock }) => {
        if (store.list === undefined) return;
        const { tool, k } = await populate(store, clock);
        const mine = await listAll(store, { toolName: tool });
        expect(keysOf(mine)).toEqual([k.completed, k.failed, k.running, k.stale].sort());
        const byKey = new Map(mine.map((r) => [r.key, r]));
        const states = Object.fromEntries(mine.map((r) => [r.key, r.inspectionState]));
        expect(states).toEqual({
          [k.completed]: 'completed',
          [k.failed]: 'failed',
          [k.running]: 'in_progress',
          [k.stale]: 'stale',
        });
        for (const record of mine) {
          expect((record as { outcome?: string }).outcome).toBeUndefined();
          const stored = await mustGet(store, record.key);
          const { outcome: _outcome, ...rest } = stored;
          const { inspectionState: _state, outcomeBytes: _bytes, ...listed } = record;
          expect(listed).toEqual(rest);
        }
        expect(byKey.get(k.completed)?.outcomeBytes).toBe(Buffer.byteLength('{"ok":"é"}'));
        expect(byKey.get(k.failed)?.outcomeBytes).toBe(7);
        expect(byKey.get(k.running)?.outcomeBytes).toBeUndefined();
        expect(byKey.get(k.running)?.meta).toEqual({
          toolName: tool,
          turnId: 'turn-a',
          scope: 's2',
        });

        for (const [state, expected] of [
          ['in_progress', [k.running]],
          ['stale', [k.stale]],
          ['completed', [k.completed]],
          ['failed', [k.failed]],
        ] as const) {
          expect(keysOf(await listAll(store, { toolName: tool, state }))).toEqual([...expected]);
        }
        expect(keysOf(await listAll(store, { toolName: tool, turnId: 'turn-a' }))).toEqual(
          [k.completed, k.running].sort(),
        );
        expect(keysOf(await listAll(store, { toolName: tool, scope: 's1' }))).toEqual(
          [k.completed, k.failed, k.stale].sort(),
        );
        expect(keysOf(await listAll(store, { turnId: 'turn-c', scope: 's1' }))).toEqual([k.stale]);
        expect(keysOf(await listAll(store, { toolName: `${tool}-nobody` }))).toEqual([]);

        // The store's own keyspace, unfiltered: everything live, the expired record not.
        const all = keysOf(await listAll(store));
        expect(all).toEqual([k.completed, k.failed, k.running, k.stale, k.other, k.bare].sort());
      },
    );

    define(
      'list (when present) pages with limit and cursor: every record exactly once',
      async ({ store }) => {
        if (store.list === undefined) return;
        const tool = `page-${randomUUID()}`;
        const base = key('page');
        const keys = Array.from({ length: 23 }, (_, i) => `${base}-${String(i).padStart(2, '0')}`);
        for (const k of keys) await acquire(store, claimInput(k, { meta: { toolName: tool } }));
        for (const limit of [1, 5, 7, 23, 1000]) {
          expect(keysOf(await listAll(store, { toolName: tool, limit }))).toEqual(keys);
        }
        const first = await store.list({ toolName: tool, limit: 5 });
        expect(first.records.length).toBe(5);
        expect(typeof first.cursor).toBe('string');
        const last = await store.list({ toolName: tool, limit: 23 });
        expect(last.records.length).toBe(23);
      },
    );

    define(
      'stats (when present) counts live records by state, stale apart, per filter',
      async ({ store, clock }) => {
        if (store.stats === undefined) return;
        const before = clock.now();
        const { tool } = await populate(store, clock);
        const after = clock.now();
        const mine = await store.stats({ toolName: tool });
        expect({ ...mine, at: 0 }).toEqual({
          records: 4,
          inProgress: 1,
          stale: 1,
          completed: 1,
          failed: 1,
          at: 0,
        });
        expectStoreTime(mine.at, before, after);
        const all = await store.stats();
        expect({ ...all, at: 0 }).toEqual({
          records: 6,
          inProgress: 2,
          stale: 1,
          completed: 2,
          failed: 1,
          at: 0,
        });
        const turnA = await store.stats({ toolName: tool, turnId: 'turn-a', scope: 's2' });
        expect(turnA.records).toBe(1);
        expect(turnA.inProgress).toBe(1);
      },
    );

    define(
      'list and stats (when present) reject bad filters with InvalidInputError',
      async ({ store }) => {
        const bad: Array<[string, () => Promise<unknown>]> = [];
        if (store.list !== undefined) {
          const list = store.list.bind(store);
          for (const limit of [0, -1, 1.5, 1001]) bad.push(['limit', () => list({ limit })]);
          bad.push(['state', () => list({ state: 'running' as never })]);
          bad.push(['cursor', () => list({ cursor: 'not a cursor of this store' })]);
          bad.push(['toolName', () => list({ toolName: '' })]);
        }
        if (store.stats !== undefined) {
          const stats = store.stats.bind(store);
          bad.push(['scope', () => stats({ scope: 42 as never })]);
        }
        for (const [field, run] of bad) {
          let error: unknown;
          try {
            await run();
          } catch (e) {
            error = e;
          }
          expect(InvalidInputError.isInstance(error)).toBe(true);
          expect((error as InvalidInputError).field).toBe(field);
        }
      },
    );
  });
}
