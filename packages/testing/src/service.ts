/**
 * Gate for tests that need a real service (Redis, PostgreSQL). With `CI=true` a missing service
 * fails the run; elsewhere the tests are skipped with a visible notice, never silently.
 *
 * ```ts
 * const redisUp = await serviceAvailable({ name: 'Redis', url, probe: () => redis.ping() });
 * describe.skipIf(!redisUp)('redis store', () => { ... });
 * ```
 */
export async function serviceAvailable(options: {
  /** For the messages, e.g. `Redis`. */
  name: string;
  /** Where it was looked for, e.g. `redis://127.0.0.1:6379`. */
  url: string;
  /** Resolves when the service answers; rejects (or times out) otherwise. */
  probe: () => Promise<unknown>;
  /** @default 3000 */
  timeoutMs?: number;
  /** @default process.env.CI === 'true' */
  ci?: boolean;
}): Promise<boolean> {
  const timeoutMs = options.timeoutMs ?? 3000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      options.probe(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return true;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (options.ci ?? process.env.CI === 'true') {
      throw new Error(
        `${options.name} is unreachable at ${options.url} (${reason}) and CI=true: the tests that need it cannot be skipped. Start ${options.name} (see .ci/run) or point the test at it with the URL variable.`,
      );
    }
    console.warn(
      `\n[idempotent-tools] SKIPPED: ${options.name} tests, ${options.name} is unreachable at ${options.url} (${reason}). Start it to run them; with CI=true this fails instead.\n`,
    );
    return false;
  } finally {
    clearTimeout(timer);
  }
}
