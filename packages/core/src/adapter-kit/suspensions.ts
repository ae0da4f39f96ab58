/**
 * A tool that may suspend its run (Mastra's `suspend`: the run waits for `resumeData`, and the
 * value the tool returns then is no outcome of the call): run it with the `suspend` functions of
 * its context watched, so that a call that suspended is handed back as `NotAnOutcome` (never
 * stored, never replayed; the resumed call runs again).
 */
import { NotAnOutcome } from '../executor/not-an-outcome.js';

type Holder = Record<string, unknown> | undefined;

/**
 * Run `execute` with a copy of `context` whose `suspend` function, and the one of each of its
 * `holders` fields (e.g. `agent`), notes that the tool suspended; a call that suspended throws
 * `NotAnOutcome` with its value.
 */
export async function runSuspendable(
  context: Holder,
  holders: readonly string[],
  execute: (context: Record<string, unknown>) => unknown,
): Promise<unknown> {
  let suspended = false;
  const watched = (on: Holder) => {
    const fn = on?.suspend as ((...args: unknown[]) => unknown) | undefined;
    if (typeof fn !== 'function') return on;
    const suspend = (...args: unknown[]) => {
      suspended = true;
      return fn(...args);
    };
    return { ...on, suspend };
  };
  const copy: Record<string, unknown> = { ...watched(context) };
  for (const field of holders) copy[field] = watched(context?.[field] as Holder);
  const value = await execute(copy);
  if (suspended) throw new NotAnOutcome(value);
  return value;
}
