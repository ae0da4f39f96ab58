/**
 * What was found (issue 15, turn identity), each through the real `openai` client against the
 * scripted server. Each of these failed before the fix. The Agents SDK's findings are in
 * `@idempotent-tools/openai-agents` (its findings.test.ts).
 */
import { createMemoryStore } from '@idempotent-tools/core';
import { scriptedServers, sendModel } from '@idempotent-tools/testing/openai';
import OpenAI from 'openai';
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { FunctionTool, ResponseInput } from 'openai/resources/responses/responses';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  createToolDispatcher,
  type Idempotency,
  type ToolDispatcher,
} from './index.js';

const { serve, closeAll } = scriptedServers(
  (baseURL) => new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 }),
);
afterEach(closeAll);

const CONFIRM = 'Yes, send it.';
const sendArgs = z.object({ text: z.string() });

const chatTool: ChatCompletionFunctionTool = {
  type: 'function',
  function: { name: 'send_message', parameters: z.toJSONSchema(sendArgs) as never },
};
const responsesTool: FunctionTool = {
  type: 'function',
  name: 'send_message',
  parameters: z.toJSONSchema(sendArgs) as never,
  strict: false,
};

function dispatcher(idempotency: Idempotency, sent: string[]) {
  return createToolDispatcher(idempotency, {
    send_message: {
      schema: sendArgs,
      execute: ({ text }: z.infer<typeof sendArgs>) => {
        sent.push(text);
        return { message: `M-${sent.length}` };
      },
    },
  });
}

/** One user turn with Chat Completions, the app keeping the messages. */
async function chatTurn(
  openai: OpenAI,
  tools: ToolDispatcher,
  history: ChatCompletionMessageParam[],
  turn: { conversationId?: string } = {},
) {
  const messages = [...history];
  for (;;) {
    const completion = await openai.chat.completions.create({
      model: 'm',
      messages,
      tools: [chatTool],
    });
    const message = completion.choices[0]?.message as ChatCompletionMessageParam & {
      tool_calls?: unknown[];
    };
    messages.push(message);
    if (!message.tool_calls?.length) return messages;
    messages.push(...(await tools.runChat(message as never, { messages, ...turn })));
  }
}

describe('finding: two users who send the same prompt share a turn (the second is replayed)', () => {
  test('runChat with default options: refused without a conversation id; one effect per user with one', async () => {
    const { openai } = await serve(sendModel);
    const sent: string[] = [];
    const tools = dispatcher(createIdempotency({ store: createMemoryStore() }), sent);
    const prompt: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You send messages.' },
      { role: 'user', content: 'Cancel my subscription.' },
    ];
    // Before: the second user got the first user's message id back, marked replayed.
    const refused = await chatTurn(openai, tools, prompt).catch((error: unknown) => error);
    expect(ConfigurationError.isInstance(refused)).toBe(true);
    expect((refused as ConfigurationError).option).toBe('conversationId');
    expect((refused as Error).message).toMatch(/Nothing ran\. Pass conversationId/);
    expect(sent).toEqual([]);

    const ann = await chatTurn(openai, tools, prompt, { conversationId: 'chat-ann' });
    const bob = await chatTurn(openai, tools, prompt, { conversationId: 'chat-bob' });
    expect(sent).toEqual(['Cancel my subscription.', 'Cancel my subscription.']);
    const outputs = (m: ChatCompletionMessageParam[]) =>
      m.filter((x) => x.role === 'tool').map((x) => JSON.parse(x.content as string));
    expect(outputs(ann)).toEqual([{ message: 'M-1' }, { message: 'M-1', replayed: true }]);
    expect(outputs(bob)).toEqual([{ message: 'M-2' }, { message: 'M-2', replayed: true }]);
  });

  test('runResponses with the whole input: the same, per conversation id', async () => {
    const { openai } = await serve(sendModel);
    const sent: string[] = [];
    const tools = dispatcher(createIdempotency({ store: createMemoryStore() }), sent);
    const input: ResponseInput = [{ role: 'user', content: 'Cancel my subscription.' }];
    const response = await openai.responses.create({ model: 'm', input, tools: [responsesTool] });
    const { output } = response;
    await expect(tools.runResponses(output, { input })).rejects.toThrow(ConfigurationError);
    await tools.runResponses(output, { input, conversationId: 'chat-ann' });
    await tools.runResponses(output, { input, conversationId: 'chat-bob' });
    expect(sent).toHaveLength(2);
  });
});

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

  async function chained(repeat: boolean) {
    const { openai } = await serve((turn) => sendModel(turn, repeat));
    const sent: string[] = [];
    const idempotency = createIdempotency({ store: createMemoryStore() });
    let tools = dispatcher(idempotency, sent);
    const outputs: string[] = [];
    let last: string | undefined;
    for (const [turn, text] of script.entries()) {
      let request: { input: string | ResponseInput; previous_response_id?: string } = {
        input: text,
        ...(last === undefined ? {} : { previous_response_id: last }),
      };
      for (;;) {
        const response = await openai.responses.create({
          model: 'm',
          instructions: `You send messages. It is 09:0${turn}.`,
          tools: [responsesTool],
          ...request,
        });
        if (!response.output.some((o) => o.type === 'function_call')) {
          last = response.id;
          break;
        }
        const turnOptions = { ...request, conversationId: 'chat-1' };
        const out = await tools.runResponses(response.output, turnOptions);
        outputs.push(...out.map((o) => o.output as string));
        // The app restarts between the steps of turn 9: the next step, holding only the tool
        // outputs, finds its turn in the store.
        if (turn === 8) tools = dispatcher(idempotency, sent);
        request = { input: out, previous_response_id: response.id };
      }
    }
    return { sent, outputs: outputs.map((o) => JSON.parse(o)) };
  }

  test('Responses chained with previous_response_id: turn 9 sends again', async () => {
    const { sent, outputs } = await chained(false);
    expect(sent).toEqual([CONFIRM, CONFIRM]);
    expect(outputs).toEqual([{ message: 'M-1' }, { message: 'M-2' }]);
  });

  test('Responses chained: a later step (tool outputs only) keeps its turn, also after a restart', async () => {
    const { sent, outputs } = await chained(true);
    expect(sent).toEqual([CONFIRM, CONFIRM]);
    expect(outputs).toEqual([
      { message: 'M-1' },
      { message: 'M-1', replayed: true }, // the model repeating the call in turn 3
      { message: 'M-2' },
      { message: 'M-2', replayed: true }, // ... in turn 9, after the restart
    ]);
  });
});

describe('finding: a retry whose system prompt was rebuilt ran the tool again', () => {
  test('Chat Completions: a lost reply, retried with a new timestamp and retrieved context: one effect', async () => {
    const { server, openai } = await serve(sendModel);
    const sent: string[] = [];
    const tools = dispatcher(createIdempotency({ store: createMemoryStore() }), sent);
    const user: ChatCompletionMessageParam = { role: 'user', content: 'Tell Ann I am late.' };
    server.inject(undefined, 'truncate'); // the reply after the tool ran is cut
    const first = [{ role: 'system' as const, content: 'It is 09:00:00.' }, user];
    await expect(chatTurn(openai, tools, first, { conversationId: 'chat-1' })).rejects.toThrow();
    const rebuilt: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'It is 09:00:07. Retrieved: Ann is in Lisbon.' },
      { role: 'developer', content: 'User plan: gold.' },
      user,
    ];
    const messages = await chatTurn(openai, tools, rebuilt, { conversationId: 'chat-1' });
    expect(sent).toHaveLength(1);
    expect(messages.at(-1)?.content).toContain('"replayed":true');
  });
});
