/**
 * The turn identity contract (docs/design.md, "Turn identity"), as the five cases of
 * @idempotent-tools/testing, on every surface of the adapter: the real `@google/genai` client
 * against the scripted Gemini server, JSON and streamed.
 */
import { runTurnIdentityCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { driver } from './test-utils/drivers.js';

const surfaces = [
  ['automatic function calling, models.generateContent', driver('afc')],
  ['automatic function calling, models.generateContentStream', driver('afc-stream')],
  ['automatic function calling, a wrapped CallableTool', driver('afc', 'callable')],
  ['hand-written loop (run), models.generateContent', driver('manual')],
  ['hand-written loop (run), models.generateContentStream', driver('manual-stream')],
  ['chats: sendMessage + run (the chat history)', driver('chat')],
  ['chats: sendMessage with automatic function calling', driver('chat-afc')],
] as const;

for (const [name, createDriver] of surfaces) {
  runTurnIdentityCases({ name, describe, test, expect, createDriver });
}
