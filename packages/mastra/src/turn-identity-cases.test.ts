/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the five cases of
 * @idempotent-tools/testing, through Mastra's Agent and its model router against the scripted
 * server: Chat Completions and Responses, `generate` (JSON) and `stream` (SSE).
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { isDeveloperError, postedHistoryDriver } from './test-utils/drivers.js';

const surfaces = [
  [
    'Mastra Agent.generate, Chat Completions, posted history',
    postedHistoryDriver('generate', 'chat'),
  ],
  ['Mastra Agent.stream, Chat Completions, posted history', postedHistoryDriver('stream', 'chat')],
  ['Mastra Agent.stream, Responses, posted history', postedHistoryDriver('stream', 'responses')],
] as const;

for (const [name, createDriver] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver, isDeveloperError });
}
