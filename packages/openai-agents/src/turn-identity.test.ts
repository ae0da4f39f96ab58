/**
 * The turn identity contract (DESIGN 3a), as the cases of @idempotent-tools/testing, on every
 * surface of the adapter: the Agents SDK's OpenAI models on the real `openai` client against the
 * scripted server, JSON and streamed. Besides the five core cases: the same words in every shape
 * the SDK's input takes (a string, `input_text` parts or a `type: 'message'` item), with a prompt
 * cache breakpoint added, taken off or moved onto the last message before every step, the model
 * repeating its call, a turn answered only by the tool's result (the SDK's
 * `stop_on_first_tool`), and tools made idempotent twice.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { setTracingDisabled } from '@openai/agents';
import { beforeAll, describe, expect, test } from 'vitest';
import { agentsDriver, agentsSupports, isDeveloperError } from './test-utils/drivers.js';

beforeAll(() => setTracingDisabled(true));

const surfaces = [
  [
    'Agents SDK run, OpenAIResponsesModel, input history, JSON',
    agentsDriver({ model: 'responses', stream: false, history: 'input' }),
    agentsSupports,
  ],
  [
    'Agents SDK run, OpenAIResponsesModel, previousResponseId, streamed',
    agentsDriver({ model: 'responses', stream: true, history: 'previousResponseId' }),
    agentsSupports,
  ],
  [
    'Agents SDK run, OpenAIChatCompletionsModel, input history, streamed',
    agentsDriver({ model: 'chat', stream: true, history: 'input' }),
    agentsSupports,
  ],
] as const;

for (const [name, createDriver, supports] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver, isDeveloperError, supports });
}
