/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the five cases of
 * @idempotent-tools/testing, on both surfaces of the adapter: the real `@anthropic-ai/sdk` client
 * against the scripted Messages server, JSON and streamed.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { createDriver } from './test-utils/drivers.js';

const surfaces = [
  ['dispatcher (messages.create)', createDriver('dispatcher', false)],
  ['dispatcher (messages.stream)', createDriver('dispatcher', true)],
  ['tool runner (threaded), JSON', createDriver('runner', false)],
  ['tool runner (threaded), streamed', createDriver('runner', true)],
] as const;

for (const [name, driver] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver: driver });
}
