/**
 * Helpers for tests that involve real time, so that their verdict never depends on how fast the
 * machine is: wait for a condition instead of sleeping and hoping, and run a clause that needs a
 * window of real time again, with longer durations, when a loaded machine slept past it.
 */
import { sleep } from './clock.js';

/**
 * A timer may fire a little before its time by the clock a test reads (libuv's cached loop time):
 * a wake-up this close to the end of a timer is counted as the timer's.
 */
export const TIMER_SLACK_MS = 100;

/**
 * Resolve once `condition` holds, polling every 10 ms. The deadline is only a hang detector
 * (5 minutes: no loaded machine is that slow, and it ends in an error naming `what` before the
 * runner's own 600 s hang detector); a test never depends on how fast the condition comes.
 */
export async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 300_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await sleep(10);
  }
}

/** Thrown by `Window.within` when the attempt slept past its window: it proves nothing. */
class MissedWindow extends Error {}

/** One attempt of a clause run by `inWindow`. */
export interface Window {
  /** This attempt's factor: 1, then 4, 16, 64. */
  readonly factor: number;
  /** A base duration scaled by this attempt's factor. */
  ms(base: number): number;
  /**
   * Call before asserting what holds only inside a window (a lease still live, a record not yet
   * expired): `held` says whether the window was kept (e.g. fewer ms passed than the lease).
   * When it was missed, the attempt is abandoned and run again with fresh keys and longer
   * durations.
   */
  within(held: boolean, what: string): void;
}

/** Duration factors of the attempts of `inWindow`. */
export const WINDOW_FACTORS: readonly number[] = [1, 4, 16, 64];

/**
 * Run `body` until one attempt keeps its window (see `Window.within`). Everything else `body`
 * asserts is asserted on every attempt; when every attempt missed its window the clause fails
 * with the reasons. `body` must use fresh keys on every attempt.
 *
 * @param label prefixes the line logged when an attempt is repeated
 */
export async function inWindow(
  body: (window: Window) => Promise<void>,
  label = 'timing',
): Promise<void> {
  const missed: string[] = [];
  for (const factor of WINDOW_FACTORS) {
    try {
      await body({
        factor,
        ms: (base) => base * factor,
        within: (held, what) => {
          if (!held) throw new MissedWindow(`${what} (durations x${factor})`);
        },
      });
      return;
    } catch (error) {
      if (!(error instanceof MissedWindow)) throw error;
      missed.push(error.message);
      console.info(
        `[${label}] missed a window, trying again with longer durations: ${error.message}`,
      );
    }
  }
  throw new Error(
    `Every attempt slept past the window this clause needs (${missed.join('; ')}): the machine is too loaded to test it.`,
  );
}
