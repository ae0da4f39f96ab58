/**
 * A tool made idempotent twice: its call would run inside a call of the same key and wait for
 * itself. Wrappers mark what they return, and refuse a marked tool when they wrap; the executor
 * refuses a call of a key that is running around it (a wrapper that did not mark).
 */
import { ConfigurationError } from '../errors/index.js';

/** Marks what an executor or adapter made idempotent (across duplicate installs). */
const WRAPPED = Symbol.for('idempotent-tools.wrapped');

/** Mark a wrapped function or tool, so that wrapping it again is refused. Returns it. */
export function markWrapped<T extends object>(value: T): T {
  Object.defineProperty(value, WRAPPED, { value: true, enumerable: false });
  return value;
}

/** Whether `value` (a function or tool) was made idempotent already. */
export function isWrapped(value: unknown): boolean {
  return (
    (typeof value === 'function' || (typeof value === 'object' && value !== null)) &&
    (value as { [WRAPPED]?: unknown })[WRAPPED] === true
  );
}

/**
 * A call of a key inside the call of the same key (a tool made idempotent twice): it would wait
 * for itself until its wait timed out, and every retry the same.
 */
export function wrappedTwice(toolName: unknown): ConfigurationError {
  return new ConfigurationError({
    option: 'wrap',
    message: `${String(toolName)} is made idempotent twice (wrapped by an adapter or idempotency.wrap and wrapped again), so its call would wait for itself. Nothing ran. Wrap the original tool once.`,
  });
}

/**
 * @throws ConfigurationError when `tool` (a function, or a tool object one of whose own
 *   functions is marked) was made idempotent already: wrapping it again would make its call wait
 *   for itself
 */
export function refuseWrapped(name: string, tool: unknown, caller: string): void {
  const marked =
    isWrapped(tool) ||
    (typeof tool === 'object' && tool !== null && Object.values(tool).some(isWrapped));
  if (!marked) return;
  throw new ConfigurationError({
    option: 'tools',
    message: `${caller}: tool "${name}" is already idempotent (it came out of an idempotent-tools wrapper), and wrapping it again would make its call wait for itself. Wrap the original tools once.`,
  });
}
