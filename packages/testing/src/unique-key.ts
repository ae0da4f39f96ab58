import { randomUUID } from 'node:crypto';

/**
 * A key no other test (in this process or another one sharing the engine) will use:
 * `${prefix}-${uuid}`.
 */
export function uniqueKey(prefix = 'test'): string {
  return `${prefix}-${randomUUID()}`;
}
