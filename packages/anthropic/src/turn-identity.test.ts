/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the cases of
 * @idempotent-tools/testing, on both surfaces of the adapter: the real `@anthropic-ai/sdk` client
 * against the scripted Messages server, JSON and streamed. Beyond the five core cases: the
 * content as a string and as text blocks, a `cache_control` breakpoint on the user's block added,
 * taken off and moved onto the last message before every step, the model repeating its call, a
 * turn answered only by the tool results (the loop stops there; the runner's
 * `max_iterations: 1`), tools made idempotent twice.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { createDriver, supports } from './test-utils/drivers.js';

const surfaces = [
  ['dispatcher (messages.create)', createDriver('dispatcher', false)],
  ['dispatcher (messages.stream)', createDriver('dispatcher', true)],
  ['tool runner (threaded), JSON', createDriver('runner', false)],
  ['tool runner (threaded), streamed', createDriver('runner', true)],
] as const;

for (const [name, driver] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver: driver, supports });
}
