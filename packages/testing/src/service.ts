import { appendFileSync } from 'node:fs';

/**
 * Where a run's reporter collects the services found missing (one JSON line each). Set by
 * `ServiceSkipReporter` (`@idempotent-tools/testing/vitest`), which prints one line per missing
 * service for the whole run, with the number of tests it skipped; without it each process warns
 * once per service.
 */
export const SERVICE_SKIP_LOG_ENV = 'IDEMPOTENT_TOOLS_SERVICE_SKIP_LOG';

/** What `serviceAvailable` records for a service it did not find (not under CI). */
export interface MissingService {
  name: string;
  url: string;
  reason: string;
  /** How to start it. */
  start: string;
  /** The test file that asked (from the call's stack), when it could be told. */
  file?: string;
}

/** How to start the services this repo's tests use, by `name`. */
const START: Record<string, string> = {
  Redis: 'redis-server --daemonize yes --port 6379, or point REDIS_URL at one',
  PostgreSQL:
    'pg_ctlcluster <version> main start (role root, database test, trust on 127.0.0.1), or point DATABASE_URL at one',
  'redis-server': 'apt-get install redis-server',
};
const DEFAULT_START = 'bash .ci/run starts every service the tests need';

/** Warned already in this process (when no reporter collects them). */
const warned = new Set<string>();

/** The first test file on the stack of the current call. */
function callerTestFile(): string | undefined {
  const stack = new Error().stack ?? '';
  const match =
    /(?:file:\/\/)?((?:\/|[A-Za-z]:[\\/])[^\s()]*?\.(?:test|spec)\.[cm]?[jt]sx?)(?=[:)\s])/.exec(
      stack,
    );
  return match?.[1];
}

/**
 * Gate for tests that need a real service (Redis, PostgreSQL). With `CI=true` a missing service
 * fails the run; elsewhere the tests are skipped (and counted as skipped) with one line naming the
 * service, never silently.
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
  /** How to start it, for the skip line. @default a command known for `name`, else `.ci/run` */
  start?: string;
  /** @default 3000 */
  timeoutMs?: number;
  /** @default process.env.CI === 'true' */
  ci?: boolean;
}): Promise<boolean> {
  const file = callerTestFile();
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
    // The first line: a failed require() appends its whole require stack.
    const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
    const start = options.start ?? START[options.name] ?? DEFAULT_START;
    if (options.ci ?? process.env.CI === 'true') {
      throw new Error(
        `${options.name} is unreachable at ${options.url} (${reason}) and CI=true: the tests that need it cannot be skipped. Start it (${start}) or point the test at it with the URL variable.`,
      );
    }
    const missing: MissingService = { name: options.name, url: options.url, reason, start };
    if (file !== undefined) missing.file = file;
    const log = process.env[SERVICE_SKIP_LOG_ENV];
    if (log !== undefined && log !== '') {
      appendFileSync(log, `${JSON.stringify(missing)}\n`);
    } else if (!warned.has(`${options.name} ${options.url}`)) {
      warned.add(`${options.name} ${options.url}`);
      console.warn(
        `[idempotent-tools] ${options.name} at ${options.url} is not reachable (${reason}): its tests are skipped (start it: ${start}); with CI=true they fail instead.`,
      );
    }
    return false;
  } finally {
    clearTimeout(timer);
  }
}
