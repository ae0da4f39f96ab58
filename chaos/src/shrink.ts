/**
 * Shrinking a failing schedule: retry it with parts removed (the keys that showed no anomaly,
 * then halves and single faults, then workers) and keep each smaller schedule that still fails
 * with an anomaly of the same kind. A run is timing-dependent, so each candidate gets `tries`
 * runs; the search stops after `maxRuns` runs. The result is the smallest schedule found, saved
 * to a file `pnpm chaos -- --schedule <file>` runs again.
 */
import type { AnomalyKind, RunResult } from './analyze.ts';
import { type RunOptions, runSchedule } from './run.ts';
import { describeSchedule, restrict } from './schedule.ts';
import type { Schedule } from './types.ts';

export interface ShrinkResult {
  schedule: Schedule;
  result: RunResult;
  runs: number;
  /** What the shrunk schedule holds. */
  summary: string;
}

export async function shrink(
  failing: Schedule,
  first: RunResult,
  options: Omit<Partial<RunOptions>, 'schedule'> & { tries?: number; maxRuns?: number },
): Promise<ShrinkResult> {
  const kinds = new Set<AnomalyKind>(first.anomalies.map((a) => a.kind));
  const tries = options.tries ?? 2;
  const maxRuns = options.maxRuns ?? 12;
  const log = options.log ?? (() => {});
  let best = failing;
  let bestResult = first;
  let runs = 0;
  const fails = async (candidate: Schedule): Promise<RunResult | undefined> => {
    for (let i = 0; i < tries && runs < maxRuns; i++) {
      runs++;
      const { log: _log, tries: _t, maxRuns: _m, ...rest } = options;
      const result = await runSchedule({ ...rest, schedule: candidate, keep: false });
      if (result.anomalies.some((a) => kinds.has(a.kind))) return result;
    }
    return undefined;
  };
  const attempt = async (candidate: Schedule, what: string) => {
    if (runs >= maxRuns) return false;
    log(`shrink: ${what}: ${describeSchedule(candidate)}`);
    const result = await fails(candidate);
    if (result === undefined) return false;
    best = candidate;
    bestResult = result;
    log('shrink: still fails');
    return true;
  };

  // 1. Only the keys that showed an anomaly.
  const bad = new Set(first.anomalies.filter((a) => kinds.has(a.kind)).map((a) => a.key));
  await attempt(restrict(best, { keys: bad }), 'the anomalous keys only');
  // 2. Faults: halves, then quarters, then one at a time.
  for (let chunks = 2; chunks <= best.faults.length && runs < maxRuns; chunks *= 2) {
    let changed = true;
    while (changed && runs < maxRuns) {
      changed = false;
      const ids = best.faults.map((f) => f.id);
      const size = Math.ceil(ids.length / chunks);
      for (let i = 0; i < ids.length && runs < maxRuns; i += size) {
        const drop = new Set(ids.slice(i, i + size));
        const keep = new Set(ids.filter((id) => !drop.has(id)));
        if (
          await attempt(restrict(best, { faults: keep }), `without faults ${[...drop].join(',')}`)
        ) {
          changed = true;
          break;
        }
      }
    }
  }
  // 3. Fewer workers.
  for (let workers = 2; workers < best.workers && runs < maxRuns; workers++) {
    if (await attempt(restrict(best, { workers }), `${workers} workers`)) break;
  }
  // 4. Fewer keys, one at a time, when few are left.
  if (best.keys.length <= 6) {
    for (const key of [...best.keys]) {
      if (runs >= maxRuns || best.keys.length <= 1) break;
      const keep = new Set(best.keys.map((k) => k.key).filter((k) => k !== key.key));
      await attempt(restrict(best, { keys: keep }), `without key ${key.key}`);
    }
  }
  return { schedule: best, result: bestResult, runs, summary: describeSchedule(best) };
}
