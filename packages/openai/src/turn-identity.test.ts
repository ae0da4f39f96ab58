/**
 * The turn identity contract (DESIGN 3a), as the five cases of @idempotent-tools/testing, on every
 * surface of the adapter: the real `openai` client (and the Agents SDK's OpenAI models on it)
 * against the scripted server, JSON and streamed.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { setTracingDisabled } from '@openai/agents';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  agentsDriver,
  chatDriver,
  isDeveloperError,
  responsesChainDriver,
  responsesInputDriver,
} from './test-utils/drivers.js';

beforeAll(() => setTracingDisabled(true));

const surfaces = [
  ['Chat Completions dispatcher (runChat), JSON', chatDriver(false)],
  ['Chat Completions dispatcher (runChat), streamed', chatDriver(true)],
  ['Responses dispatcher (runResponses), whole input, JSON', responsesInputDriver(false)],
  ['Responses dispatcher (runResponses), previous_response_id, JSON', responsesChainDriver(false)],
  [
    'Responses dispatcher (runResponses), previous_response_id, streamed',
    responsesChainDriver(true),
  ],
  [
    'Agents SDK run, OpenAIResponsesModel, input history, JSON',
    agentsDriver({ model: 'responses', stream: false, history: 'input' }),
  ],
  [
    'Agents SDK run, OpenAIResponsesModel, previousResponseId, streamed',
    agentsDriver({ model: 'responses', stream: true, history: 'previousResponseId' }),
  ],
  [
    'Agents SDK run, OpenAIChatCompletionsModel, input history, streamed',
    agentsDriver({ model: 'chat', stream: true, history: 'input' }),
  ],
] as const;

for (const [name, createDriver] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver, isDeveloperError });
}
