/**
 * The turn identity contract (DESIGN 3a), as the cases of @idempotent-tools/testing, on every
 * surface of the adapter: the real `openai` client (and the Agents SDK's OpenAI models on it)
 * against the scripted server, JSON and streamed. Besides the five core cases: the same words in
 * every shape each API takes (Chat: a string or text parts; Responses: a string, `input_text`
 * parts or a `type: 'message'` item; the Agents SDK: the same as its input), with a prompt cache
 * breakpoint added, taken off or moved onto the last message before every step, the model
 * repeating its call, a turn answered only by the tool's result (the app's loop stops after the
 * outputs; the Agents SDK's `stop_on_first_tool`), and tools made idempotent twice.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { setTracingDisabled } from '@openai/agents';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  agentsDriver,
  agentsSupports,
  chatDriver,
  dispatcherSupports,
  isDeveloperError,
  responsesChainDriver,
  responsesInputDriver,
} from './test-utils/drivers.js';

beforeAll(() => setTracingDisabled(true));

const chat = dispatcherSupports(['string', 'parts']);
const responses = dispatcherSupports(['string', 'parts', 'items']);

const surfaces = [
  ['Chat Completions dispatcher (runChat), JSON', chatDriver(false), chat],
  ['Chat Completions dispatcher (runChat), streamed', chatDriver(true), chat],
  [
    'Responses dispatcher (runResponses), whole input, JSON',
    responsesInputDriver(false),
    responses,
  ],
  [
    'Responses dispatcher (runResponses), previous_response_id, JSON',
    responsesChainDriver(false),
    responses,
  ],
  [
    'Responses dispatcher (runResponses), previous_response_id, streamed',
    responsesChainDriver(true),
    responses,
  ],
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
