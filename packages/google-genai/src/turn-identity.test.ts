/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the cases of
 * @idempotent-tools/testing, on every surface of the adapter: the real `@google/genai` client
 * against the scripted Gemini server, JSON and streamed. Beyond the five core cases: the user's
 * message as a `Content`, a string and `[{ text }]` parts (a chat's `sendMessage` takes the last
 * two), the model repeating its call, a turn answered only by the function responses (the loop
 * stops there; automatic function calling with `maximumRemoteCalls: 1`, except streamed, which
 * sends them to the model even then), functions made idempotent twice.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import type { Surface } from './test-utils/app.js';
import { driver, supportsOf, type Wrapping } from './test-utils/drivers.js';

const surfaces: [string, Surface, Wrapping?][] = [
  ['automatic function calling, models.generateContent', 'afc'],
  ['automatic function calling, models.generateContentStream', 'afc-stream'],
  ['automatic function calling, a wrapped CallableTool', 'afc', 'callable'],
  ['hand-written loop (run), models.generateContent', 'manual'],
  ['hand-written loop (run), models.generateContentStream', 'manual-stream'],
  ['chats: sendMessage + run (the chat history)', 'chat'],
  ['chats: sendMessage with automatic function calling', 'chat-afc'],
];

for (const [name, surface, wrapping] of surfaces) {
  const createDriver = driver(surface, wrapping);
  runTurnIdentityCases({
    name,
    describe,
    test,
    expect,
    createDriver,
    supports: supportsOf(surface),
  });
}
