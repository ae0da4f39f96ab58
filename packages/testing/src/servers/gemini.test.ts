import { GoogleGenAI } from '@google/genai';
import { afterEach, expect, test } from 'vitest';
import { type ScriptedServer, startScriptedServer } from './gemini.js';

const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(callIds?: boolean) {
  const server = await startScriptedServer({
    ...(callIds === undefined ? {} : { callIds }),
    respond: (turn) => ({
      text: `${turn.model} heard "${turn.userText}" (system: ${turn.system || 'none'})`,
      functionCalls: [{ name: 'f', args: { n: 1 } }],
    }),
  });
  servers.push(server);
  return { server, ai: new GoogleGenAI({ apiKey: 'k', httpOptions: { baseUrl: server.baseUrl } }) };
}

type Chunk = { candidates?: Array<{ content?: { parts?: Array<{ text?: string }> } }> };
/** The text parts of a response (its `.text` getter warns when there are function calls too). */
const textOf = (r: Chunk) =>
  (r.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? '').join('');

const params = {
  model: 'gemini-x',
  contents: 'hello',
  config: { systemInstruction: 'be brief', automaticFunctionCalling: { disable: true } },
};

test('JSON: the model sees the user text and the system instruction; calls get ids', async () => {
  const { server, ai } = await start();
  const response = await ai.models.generateContent(params);
  expect(textOf(response)).toBe('gemini-x heard "hello" (system: be brief)');
  expect(response.functionCalls).toEqual([
    { name: 'f', args: { n: 1 }, id: expect.stringMatching(/^call_/) },
  ]);
  expect(server.requests[0]?.path).toMatch(/\/models\/gemini-x:generateContent$/);
  expect(server.requests[0]?.headers['x-goog-api-key']).toBe('k');
});

test('SSE: the text in two chunks, the calls in the last; callIds: false leaves ids out', async () => {
  const { server, ai } = await start(false);
  const chunks = [];
  for await (const chunk of await ai.models.generateContentStream(params)) chunks.push(chunk);
  expect(chunks.map(textOf).join('')).toBe('gemini-x heard "hello" (system: be brief)');
  expect(chunks).toHaveLength(3);
  expect(chunks.at(-1)?.functionCalls).toEqual([{ name: 'f', args: { n: 1 } }]);
  expect(server.requests[0]?.path).toMatch(/:streamGenerateContent$/);
});

test('faults: a dropped connection, an HTTP error, a cut body, a broken stream; an unknown path', async () => {
  const { server, ai } = await start();
  server.inject('drop', { status: 503 }, 'truncate', 'truncate');
  await expect(ai.models.generateContent(params)).rejects.toThrow();
  await expect(ai.models.generateContent(params)).rejects.toMatchObject({ status: 503 });
  await expect(ai.models.generateContent(params)).rejects.toThrow();
  const stream = await ai.models.generateContentStream(params);
  const seen: string[] = [];
  await expect(
    (async () => {
      for await (const chunk of stream) seen.push(textOf(chunk));
    })(),
  ).rejects.toThrow();
  expect(seen).toHaveLength(1); // half of the three events, then the cut
  expect(server.requests.map((r) => r.fault)).toEqual([
    'drop',
    { status: 503 },
    'truncate',
    'truncate',
  ]);
  const response = await fetch(`${server.baseUrl}/v1beta/models/x:countTokens`, { method: 'POST' });
  expect(response.status).toBe(404);
});
