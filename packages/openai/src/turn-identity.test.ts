/**
 * The turn identity contract (DESIGN 3a), as the cases of @idempotent-tools/testing, on every
 * surface of the adapter: the real `openai` client against the scripted server, JSON and
 * streamed. Besides the five core cases: the same words in every shape each API takes (Chat: a
 * string or text parts; Responses: a string, `input_text` parts or a `type: 'message'` item),
 * with a prompt cache breakpoint added, taken off or moved onto the last message before every
 * step, the model repeating its call, a turn answered only by the tool's result (the app's loop
 * stops after the outputs), and tools made idempotent twice.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import {
  chatDriver,
  dispatcherSupports,
  isDeveloperError,
  responsesChainDriver,
  responsesInputDriver,
} from './test-utils/drivers.js';

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
] as const;

for (const [name, createDriver, supports] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver, isDeveloperError, supports });
}
