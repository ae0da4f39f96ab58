/**
 * What was found (issue 15, turn identity), each through the Agents SDK's OpenAI models on the
 * real `openai` client against the scripted server. Each of these failed before the fix. The
 * approval resumed in another process is in approval.test.ts.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import { scriptedServers, sendModel } from '@idempotent-tools/testing/openai';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { wrapAgentTools } from './agents.js';
import { createIdempotency } from './index.js';

beforeAll(() => setTracingDisabled(true));
const { serve, closeAll } = scriptedServers(
  (baseURL) => new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 }),
);
afterEach(closeAll);

const CONFIRM = 'Yes, send it.';
const sendArgs = z.object({ text: z.string() });

describe('finding: turn 9 "Yes, send it." was replayed from turn 3 of the same conversation', () => {
  const script = [
    'Draft a note to Ann.',
    'Thanks',
    CONFIRM,
    'Draft one to Bob.',
    'Thanks',
    'Draft one to Cy.',
    'Thanks',
    'Hi',
    CONFIRM,
  ];

  test('Agents SDK with previousResponseId: two sends', async () => {
    const { openai } = await serve(sendModel);
    const sent: string[] = [];
    const send = tool({
      name: 'send_message',
      description: 'Send a message.',
      parameters: sendArgs,
      execute: ({ text }) => {
        sent.push(text);
        return { message: `M-${sent.length}` };
      },
    });
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({ name: 'a', tools: [send], model: new OpenAIResponsesModel(openai, 'm') }),
    );
    let previousResponseId: string | undefined;
    for (const text of script) {
      const options = previousResponseId === undefined ? {} : { previousResponseId };
      const result = await run(agent, text, { ...options, context: { conversationId: 'chat-1' } });
      previousResponseId = result.lastResponseId;
    }
    expect(sent).toEqual([CONFIRM, CONFIRM]);
  });
});

describe('finding: a retry whose system prompt was rebuilt ran the tool again', () => {
  test('Agents SDK: rebuilt instructions and retrieved context in the input: one effect', async () => {
    const { server, openai } = await serve(sendModel);
    const sent: string[] = [];
    const send = tool({
      name: 'send_message',
      description: 'Send a message.',
      parameters: sendArgs,
      execute: ({ text }) => {
        sent.push(text);
        return { message: `M-${sent.length}` };
      },
    });
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const attempt = (time: string, retrieved: string) =>
      run(
        wrapAgentTools(
          idempotency,
          new Agent({
            name: 'a',
            instructions: `You send messages. It is ${time}.`,
            tools: [send],
            model: new OpenAIResponsesModel(openai, 'm'),
          }),
        ),
        [
          { role: 'system', content: `Retrieved: ${retrieved}` },
          { role: 'user', content: 'Tell Ann I am late.' },
        ],
        { context: { conversationId: 'chat-1' } },
      );
    server.inject(undefined, 'truncate');
    await expect(attempt('09:00:00', 'Ann is at work.')).rejects.toThrow();
    const retried = await attempt('09:00:07', 'Ann is in Lisbon.');
    expect(sent).toHaveLength(1);
    expect(retried.finalOutput).toContain('"replayed":true');
  });
});

describe('finding: Agents SDK replays of content parts lost their mark or their image', () => {
  const image = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==';
  test('text and [text, image] outputs: the model gets the parts, the mark in the text part', async () => {
    const { server, openai } = await serve((turn) => {
      const calls = [
        { name: 'note', arguments: {} },
        { name: 'receipt', arguments: {} },
      ];
      return turn.toolOutputs.length < 4 ? { toolCalls: calls } : { content: 'ok' };
    });
    let runs = 0;
    const note = tool({
      name: 'note',
      description: 'Take a note.',
      parameters: z.object({}),
      execute: () => ({ type: 'text' as const, text: `Noted N-${++runs}` }),
    });
    const receipt = tool({
      name: 'receipt',
      description: 'Photograph the receipt.',
      parameters: z.object({}),
      execute: () => [
        { type: 'text' as const, text: `Receipt R-${++runs}` },
        { type: 'image' as const, image },
      ],
    });
    const agent = wrapAgentTools(
      createIdempotency({ store: createMemoryStore() }),
      new Agent({
        name: 'a',
        tools: [note, receipt],
        model: new OpenAIResponsesModel(openai, 'm'),
      }),
    );
    await run(agent, 'Log the lunch.', { context: { conversationId: 'chat-1' } });
    expect(runs).toBe(2);
    // What the model received: the outputs of the repeated calls, in the third request.
    const body = server.requests[2]?.body as { input: Array<Record<string, unknown>> };
    const outputs = body.input.filter((i) => i.type === 'function_call_output');
    expect(outputs.map((o) => o.output)).toEqual([
      [{ type: 'input_text', text: 'Noted N-1' }],
      [
        { type: 'input_text', text: 'Receipt R-2' },
        expect.objectContaining({ type: 'input_image', image_url: image }),
      ],
      [{ type: 'input_text', text: 'Noted N-1\n\n{"replayed":true}' }],
      [
        { type: 'input_text', text: 'Receipt R-2\n\n{"replayed":true}' },
        expect.objectContaining({ type: 'input_image', image_url: image }),
      ],
    ]);
  });
});
