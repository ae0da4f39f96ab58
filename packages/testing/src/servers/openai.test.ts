/**
 * The scripted server against the real clients: JSON and `stream: true` (server-sent events) for
 * Chat Completions and Responses with the `openai` client, and the Agents SDK's OpenAI models;
 * Responses state (`previous_response_id`, `conversation`) as the API keeps it.
 */
import {
  Agent,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { type ModelTurn, type ScriptedServer, startScriptedServer } from './openai.js';

beforeAll(() => setTracingDisabled(true));
const servers: ScriptedServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Calls `echo` once with the user's words, then answers with what it returned. */
function echoModel(turn: ModelTurn) {
  if (turn.toolOutputs.length === 0) {
    return {
      content: 'Let me check.',
      toolCalls: [{ name: 'echo', arguments: { text: turn.userText } }],
    };
  }
  return { content: `echo said ${turn.toolOutputs.join(', ')}` };
}

async function serve() {
  const server = await startScriptedServer({ respond: echoModel });
  servers.push(server);
  return { server, openai: new OpenAI({ apiKey: 'test', baseURL: server.baseURL, maxRetries: 0 }) };
}

const echoTool = {
  type: 'function' as const,
  function: {
    name: 'echo',
    parameters: { type: 'object', properties: { text: { type: 'string' } } },
  },
};

describe('the scripted server with the real openai client', () => {
  test('Chat Completions, streamed: text deltas and a tool call, as the JSON reply has them', async () => {
    const { openai } = await serve();
    const messages = [{ role: 'user' as const, content: 'ping' }];
    const json = await openai.chat.completions.create({ model: 'm', messages, tools: [echoTool] });
    const stream = openai.chat.completions.stream({ model: 'm', messages, tools: [echoTool] });
    const deltas: string[] = [];
    stream.on('content.delta', ({ delta }) => deltas.push(delta));
    const streamed = await stream.finalChatCompletion();
    for (const completion of [json, streamed]) {
      const message = completion.choices[0]?.message;
      expect(message?.content).toBe('Let me check.');
      expect(message?.tool_calls?.[0]).toMatchObject({
        type: 'function',
        function: { name: 'echo', arguments: '{"text":"ping"}' },
      });
      expect(completion.choices[0]?.finish_reason).toBe('tool_calls');
    }
    expect(deltas.join('')).toBe('Let me check.');
    expect(deltas.length).toBe(2);
  });

  test('Responses, streamed: output items and text as the JSON reply has them', async () => {
    const { openai } = await serve();
    const tools = [{ type: 'function' as const, name: 'echo', parameters: null, strict: false }];
    const json = await openai.responses.create({ model: 'm', input: 'ping', tools });
    const stream = openai.responses.stream({ model: 'm', input: 'ping', tools });
    const types = new Set<string>();
    for await (const event of stream) types.add(event.type);
    const streamed = await stream.finalResponse();
    for (const response of [json, streamed]) {
      expect(response.output.map((o) => o.type)).toEqual(['function_call', 'message']);
      expect(response.output[0]).toMatchObject({ name: 'echo', arguments: '{"text":"ping"}' });
      expect(response.output_text).toBe('Let me check.');
    }
    expect([...types]).toEqual(
      expect.arrayContaining([
        'response.created',
        'response.function_call_arguments.delta',
        'response.output_text.delta',
        'response.completed',
      ]),
    );
  });

  test('Responses state: previous_response_id and conversation continue the stored items', async () => {
    const { openai } = await serve();
    const first = await openai.responses.create({ model: 'm', input: 'ping' });
    const call = first.output[0] as { call_id: string };
    const next = await openai.responses.create({
      model: 'm',
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: 'pong' }],
    });
    expect(next.output_text).toBe('echo said pong');
    expect(next.previous_response_id).toBe(first.id);
    await expect(
      openai.responses.create({ model: 'm', previous_response_id: 'resp_nope', input: 'x' }),
    ).rejects.toMatchObject({ status: 400 });

    const conversation = await openai.conversations.create({});
    const inConversation = await openai.responses.create({
      model: 'm',
      conversation: conversation.id,
      input: 'hello',
    });
    const id = (inConversation.output[0] as { call_id: string }).call_id;
    const answered = await openai.responses.create({
      model: 'm',
      conversation: conversation.id,
      input: [{ type: 'function_call_output', call_id: id, output: 'hi' }],
    });
    expect(answered.output_text).toBe('echo said hi');
    expect(answered.conversation).toEqual({ id: conversation.id });
  });

  test('a broken stream: half of the events, then the client fails', async () => {
    const { server, openai } = await serve();
    server.inject('truncate');
    const stream = openai.responses.stream({ model: 'm', input: 'ping' });
    await expect(stream.finalResponse()).rejects.toThrow();
  });
});

describe('the scripted server with the Agents SDK OpenAI models', () => {
  for (const [name, make] of [
    ['OpenAIResponsesModel', (o: OpenAI) => new OpenAIResponsesModel(o, 'm')],
    ['OpenAIChatCompletionsModel', (o: OpenAI) => new OpenAIChatCompletionsModel(o, 'm')],
  ] as const) {
    for (const stream of [false, true]) {
      test(`${name}, ${stream ? 'streamed' : 'JSON'}: the tool runs, the answer has its output`, async () => {
        const { openai } = await serve();
        const seen: string[] = [];
        const echo = tool({
          name: 'echo',
          description: 'Echo.',
          parameters: z.object({ text: z.string() }),
          execute: ({ text }) => {
            seen.push(text);
            return text.toUpperCase();
          },
        });
        const agent = new Agent({ name: 'a', tools: [echo], model: make(openai) });
        const result = stream
          ? await run(agent, 'ping', { stream: true })
          : await run(agent, 'ping');
        if (stream) await (result as { completed: Promise<void> }).completed;
        expect(seen).toEqual(['ping']);
        expect(result.finalOutput).toBe('echo said PING');
      });
    }
  }
});
