import type { CallOutcome, EventHandler, IdempotencyEvent } from './events.js';
import { isReplay } from './events.js';

/** A log level of a pino-compatible logger, or `silent` (not logged). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

/** One logging method: pino's `(mergingObject, message)`. */
export type LogMethod = (object: Record<string, unknown>, message?: string) => void;

/**
 * A pino-compatible logger: pino itself, a pino child, or anything with `info`, `warn` and
 * `error` taking `(object, message)` (`console` too). A missing `trace`/`debug` falls back to
 * `info`, a missing `fatal` to `error`.
 */
export interface LoggerLike {
  info: LogMethod;
  warn: LogMethod;
  error: LogMethod;
  trace?: LogMethod;
  debug?: LogMethod;
  fatal?: LogMethod;
}

export interface LoggerSinkOptions {
  /**
   * Leave the raw args out of the log even when the executor puts them on events
   * (`exposeArgs: true`). Events never carry raw results; args are represented by
   * `argsFingerprint` and `argsBytes`. `false` logs `args` when present: **unsafe** (secrets,
   * personal data), for debugging only.
   * @default true
   */
  redact?: boolean;
  /**
   * Level per outcome, merged over the defaults: `info` for executed, replayed and waited; `warn`
   * for reconciled, drift, in-progress and failed; `error` for persist-failed, outcome-unknown
   * and store-unavailable. `silent` drops an outcome.
   * @default see above
   */
  levels?: Partial<Record<CallOutcome, LogLevel>>;
  /**
   * The property of the logged object that holds the event fields; `false` puts them at the top
   * level (beside pino's own `level`, `time`, `msg`).
   * @default 'idempotency'
   */
  field?: string | false;
  /**
   * The log message.
   * @default (event) => `${event.toolName} ${event.outcome}`
   */
  message?: (event: IdempotencyEvent) => string;
}

/** The default level of each outcome. */
export const DEFAULT_LOG_LEVELS: Readonly<Record<CallOutcome, LogLevel>> = {
  executed: 'info',
  replayed: 'info',
  waited: 'info',
  reconciled: 'warn',
  drift: 'warn',
  'in-progress': 'warn',
  failed: 'warn',
  'persist-failed': 'error',
  'outcome-unknown': 'error',
  'store-unavailable': 'error',
  unguarded: 'warn',
  'integrity-failed': 'error',
  settled: 'warn',
};

/**
 * An event sink that logs every call on a pino-compatible logger: one line per call with the key,
 * tool, scope, turn, outcome, `replayed`, timings, error code, the args' fingerprint and size and
 * the result's size. Raw args and results are never logged by default.
 *
 * ```ts
 * import pino from 'pino';
 * const idempotency = createIdempotency({ store, onEvent: createLoggerSink(pino()) });
 * // {"level":30,"idempotency":{"key":"v1_...","toolName":"charge_card","outcome":"replayed",...},"msg":"charge_card replayed"}
 * ```
 */
export function createLoggerSink(
  logger: LoggerLike,
  options: LoggerSinkOptions = {},
): EventHandler {
  if (
    logger === null ||
    typeof logger !== 'object' ||
    typeof logger.info !== 'function' ||
    typeof logger.warn !== 'function' ||
    typeof logger.error !== 'function'
  ) {
    throw new TypeError(
      'createLoggerSink needs a pino-compatible logger (info, warn and error methods), e.g. createLoggerSink(pino()).',
    );
  }
  const redact = options.redact ?? true;
  const levels = { ...DEFAULT_LOG_LEVELS, ...options.levels };
  const field = options.field ?? 'idempotency';
  const message = options.message ?? ((event) => `${event.toolName} ${event.outcome}`);
  const method = (level: LogLevel): LogMethod | undefined => {
    switch (level) {
      case 'silent':
        return undefined;
      case 'trace':
      case 'debug':
        return (logger[level] ?? logger.info).bind(logger);
      case 'fatal':
        return (logger.fatal ?? logger.error).bind(logger);
      default:
        return logger[level].bind(logger);
    }
  };
  return (event) => {
    const log = method(levels[event.outcome] ?? 'info');
    if (log === undefined) return;
    const fields: Record<string, unknown> = {
      key: event.key,
      toolName: event.toolName,
      outcome: event.outcome,
      replayed: isReplay(event),
      store: event.store,
      startedAt: event.startedAt,
      durationMs: event.durationMs,
      argsFingerprint: event.argsFingerprint,
      argsBytes: event.argsBytes,
    };
    if (event.scope !== undefined) fields.scope = event.scope;
    if (event.turnId !== undefined) fields.turnId = event.turnId;
    if (event.waitedMs !== undefined) fields.waitedMs = event.waitedMs;
    if (event.errorCode !== undefined) fields.errorCode = event.errorCode;
    if (event.resultBytes !== undefined) fields.resultBytes = event.resultBytes;
    if (event.operator !== undefined) fields.operator = event.operator;
    if (!redact && 'args' in event) fields.args = event.args;
    log(field === false ? fields : { [field]: fields }, message(event));
  };
}
