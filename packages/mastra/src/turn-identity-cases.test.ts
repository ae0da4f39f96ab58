/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the cases of
 * @idempotent-tools/testing, through Mastra's Agent and its model router against the scripted
 * server: Mastra Memory threads (`generate` and `stream`), and a stateless backend whose client
 * posts the history (Chat Completions and Responses, `generate` (JSON) and `stream` (SSE)).
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import {
  isDeveloperError,
  memoryThreadDriver,
  postedHistoryDriver,
  SHAPES,
} from './test-utils/drivers.js';

const methods = ['sayRepeatingCall', 'sayAnsweredByTool'] as const;
const surfaces = [
  [
    'Mastra Agent.generate, memory thread',
    memoryThreadDriver('generate'),
    { shapes: SHAPES, providerOptions: true, wrapTwice: true, methods },
  ],
  [
    'Mastra Agent.stream, memory thread',
    memoryThreadDriver('stream'),
    { shapes: SHAPES, providerOptions: true, wrapTwice: true, methods },
  ],
  [
    'Mastra Agent.generate, Chat Completions, posted history',
    postedHistoryDriver('generate', 'chat'),
    { shapes: ['string', 'parts'], providerOptions: true, wrapTwice: true, methods },
  ],
  [
    'Mastra Agent.stream, Chat Completions, posted history',
    postedHistoryDriver('stream', 'chat'),
    { shapes: ['string', 'parts'], providerOptions: true, wrapTwice: true, methods },
  ],
  [
    'Mastra Agent.stream, Responses, posted history',
    postedHistoryDriver('stream', 'responses'),
    { shapes: ['string', 'parts'], providerOptions: true, wrapTwice: true, methods },
  ],
] as const;

for (const [name, createDriver, supports] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver, supports, isDeveloperError });
}
