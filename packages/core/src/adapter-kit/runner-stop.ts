/**
 * For a framework's runner that calls the tools itself: a developer error found while it runs
 * (a call whose turn cannot be identified) stops it before its next request, and is what the
 * runner then throws instead of the abort error it ends with.
 */

export interface RunnerStop {
  /** Give it to the runner's requests: it aborts on `stop`. */
  readonly signal: AbortSignal;
  /** Keeps the first error and aborts `signal`. */
  stop(error: unknown): void;
  /**
   * Makes the runner's async iterator and the named methods (each returning a promise) throw the
   * kept error, when there is one, instead of their own. Returns the same runner.
   */
  guard<T extends object>(runner: T, methods: readonly (keyof T)[]): T;
}

export function createRunnerStop(): RunnerStop {
  const controller = new AbortController();
  let failure: { error: unknown } | undefined;
  const rethrow = (error: unknown): never => {
    throw failure === undefined ? error : failure.error;
  };
  return {
    signal: controller.signal,
    stop(error) {
      failure ??= { error };
      controller.abort(error);
    },
    guard(runner, methods) {
      const target = runner as Record<PropertyKey, unknown>;
      const iterate = target[Symbol.asyncIterator] as () => AsyncIterator<unknown>;
      if (typeof iterate === 'function') {
        const iterable = { [Symbol.asyncIterator]: iterate.bind(runner) };
        target[Symbol.asyncIterator] = async function* () {
          try {
            return yield* iterable;
          } catch (error) {
            return rethrow(error);
          }
        };
      }
      for (const name of methods) {
        const method = (
          target[name as PropertyKey] as (...args: unknown[]) => Promise<unknown>
        ).bind(runner);
        target[name as PropertyKey] = (...args: unknown[]) => method(...args).catch(rethrow);
      }
      return runner;
    },
  };
}
