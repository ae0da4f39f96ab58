/**
 * The findings of the turn identity review (issue 15), each through the real AI SDK loop with the
 * real `@ai-sdk/openai` client (Chat Completions and Responses) against the scripted server over
 * HTTP, and through a `useChat` route driven by the AI SDK's own `DefaultChatTransport`.
 */

import { createMemoryStore } from '@idempotent-tools/core';
import {
  convertToModelMessages,
  generateText,
  isStepCount,
  type ModelMessage,
  streamText,
  type Tool,
  tool,
} from 'ai';
import { afterEach, describe, expect, test } from 'vitest';
import { z } from 'zod';
import { ConfigurationError, InvalidInputError, idempotentTools } from './index.js';
import { Chat, startChatApp, textOf, toolOutputs } from './test-utils/chat-app.js';
import {
  APIS,
  type ScriptedModel,
  startScriptedModel,
  supportAgent,
} from './test-utils/scripted-model.js';
import { supportDesk } from './test-utils/support-desk.js';

const PROMPT = 'Cancel my subscription.';
const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0)) await close();
});

async function scripted(): Promise<ScriptedModel> {
  const model = await startScriptedModel(supportAgent('cancel_subscription'));
  closing.push(model.close);
  return model;
}

function configurationError(fn: () => unknown): ConfigurationError {
  try {
    fn();
  } catch (error) {
    if (ConfigurationError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError, nothing was thrown');
}

async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return new Error('expected a rejection, it resolved');
}

describe('finding: two users who send the same prompt share a turn, the second is replayed from the first', () => {
  test('default options (no conversationId, no turnId) are refused when the tools are wrapped', () => {
    const error = configurationError(() =>
      idempotentTools(supportDesk().tools, { store: createMemoryStore() }),
    );
    expect(error.option).toBe('conversationId');
    expect(error.message).toMatch(
      /idempotentTools: .*cancel_subscription would replay one user's call to another user.*Pass conversationId/,
    );
  });

  for (const api of APIS) {
    test(`${api}: with a conversationId per user, each user gets their own cancellation and sees their own refund`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const store = createMemoryStore();
      const run = (chatId: string) =>
        generateText({
          model: model.model(api),
          tools: idempotentTools(desk.tools, { store, conversationId: chatId }),
          prompt: PROMPT,
          stopWhen: isStepCount(5),
        });
      const ada = await run('chat-ada');
      const bob = await run('chat-bob');
      expect(desk.cancellations).toHaveLength(2);
      expect(ada.text).toContain('re_1');
      expect(bob.text).toContain('re_2');
      expect(bob.text).not.toContain('re_1');
      expect(bob.steps[0]?.toolResults[0]?.output).toEqual({ cancelled: true, refund: 're_2' });
    });
  }
});

/** A useChat app: the route wraps the tools per request with the chat id of the body. */
async function chatApp(api: (typeof APIS)[number]) {
  const model = await scripted();
  const desk = supportDesk();
  const store = createMemoryStore();
  const app = await startChatApp(async ({ id, messages }) => {
    const result = streamText({
      model: model.model(api),
      tools: idempotentTools(desk.tools, { store, conversationId: id }),
      messages: await convertToModelMessages(messages),
      stopWhen: isStepCount(5),
    });
    return result.toUIMessageStreamResponse();
  });
  closing.push(app.close);
  return { model, desk, app };
}

describe('finding: two useChat chats whose first message is the same share a turn', () => {
  for (const api of APIS) {
    test(`${api}: chat B gets its own cancellation, not chat A's replayed`, async () => {
      const { desk, app } = await chatApp(api);
      const a = await new Chat(app.api, 'chat-a').send(PROMPT);
      const b = await new Chat(app.api, 'chat-b').send(PROMPT);
      expect(desk.cancellations).toHaveLength(2);
      expect(toolOutputs(a.message)).toEqual([{ cancelled: true, refund: 're_1' }]);
      expect(toolOutputs(b.message)).toEqual([{ cancelled: true, refund: 're_2' }]);
      expect(textOf(b.message)).toContain('re_2');
    });

    test(`${api}: regenerate of a turn is a retry: one cancellation, replayed`, async () => {
      const { desk, app } = await chatApp(api);
      const chat = new Chat(app.api, 'chat-a');
      await chat.send(PROMPT);
      const again = await chat.regenerate();
      expect(desk.cancellations).toHaveLength(1);
      expect(toolOutputs(again.message)).toEqual([
        { cancelled: true, refund: 're_1', replayed: true },
      ]);
      // A new message with the same words after the answer is a new action.
      await chat.send(PROMPT);
      expect(desk.cancellations).toHaveLength(2);
    });

    test(`${api}: a broken stream resent by the app (regenerate) is a retry: one cancellation`, async () => {
      const { model, desk, app } = await chatApp(api);
      const chat = new Chat(app.api, 'chat-a');
      model.server.inject(undefined, 'truncate'); // the answer's stream breaks after the tool ran
      const broken = await chat.send(PROMPT);
      expect(desk.cancellations).toHaveLength(1);
      expect(broken.errors.length + app.serverErrors.length).toBeGreaterThan(0);
      const again = await chat.regenerate();
      expect(desk.cancellations).toHaveLength(1);
      expect(toolOutputs(again.message)).toEqual([
        { cancelled: true, refund: 're_1', replayed: true },
      ]);
      expect(textOf(again.message)).toContain('re_1');
    });
  }
});

describe('the answered rule in useChat: what a broken stream leaves in the chat', () => {
  for (const api of APIS) {
    test(`${api}: the partial assistant message is dropped by regenerate (a retry); a new message after it is a new turn`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const store = createMemoryStore();
      const received: Array<{ trigger: string; roles: string[] }> = [];
      const app = await startChatApp(async ({ id, messages, trigger }) => {
        received.push({ trigger, roles: messages.map((m) => m.role) });
        const result = streamText({
          model: model.model(api),
          tools: idempotentTools(desk.tools, { store, conversationId: id }),
          messages: await convertToModelMessages(messages),
          stopWhen: isStepCount(5),
        });
        return result.toUIMessageStreamResponse();
      });
      closing.push(app.close);
      const chat = new Chat(app.api, 'chat-a');
      model.server.inject(undefined, 'truncate'); // the answer's stream breaks after the tool ran
      await chat.send(PROMPT);
      // The client keeps what arrived: a partial assistant message with the tool's output.
      const partial = chat.messages.at(-1);
      expect(partial?.role).toBe('assistant');
      expect(toolOutputs(partial)).toEqual([{ cancelled: true, refund: 're_1' }]);
      // regenerate() drops it: the route gets the turn without it, and replays the call.
      const again = await chat.regenerate();
      expect(received.at(-1)).toEqual({ trigger: 'regenerate-message', roles: ['user'] });
      expect(toolOutputs(again.message)).toEqual([
        { cancelled: true, refund: 're_1', replayed: true },
      ]);
      expect(desk.cancellations).toHaveLength(1);

      // The next turn (the same words after the answer) breaks the same way; the user types the
      // words again instead of retrying: the partial answer, whose tool output the user saw,
      // answered that turn, so this is a new one.
      model.server.inject(undefined, 'truncate');
      await chat.send(PROMPT);
      expect(desk.cancellations).toHaveLength(2);
      expect(toolOutputs(chat.messages.at(-1))).toEqual([{ cancelled: true, refund: 're_2' }]);
      await chat.send(PROMPT);
      expect(received.at(-1)?.roles).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
      expect(desk.cancellations).toHaveLength(3);
    });
  }
});

describe('finding: an error for the developer became a tool-error the model reads', () => {
  /** Wrapped once at module level; the conversation comes from toolsContext, which is forgotten. */
  const fromContext = (desk: ReturnType<typeof supportDesk>) =>
    idempotentTools(desk.withContext, {
      store: createMemoryStore(),
      conversationId: ({ options }) => options.context?.chatId as string | undefined,
    });

  for (const api of APIS) {
    test(`${api}: generateText rejects with the ConfigurationError; nothing ran; the model was not told`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const error = await rejection(
        generateText({
          model: model.model(api),
          tools: fromContext(desk),
          toolsContext: { cancel_subscription: {} }, // the chat id did not reach the tool
          prompt: PROMPT,
          stopWhen: isStepCount(5),
        }),
      );
      expect(ConfigurationError.isInstance(error)).toBe(true);
      expect((error as ConfigurationError).option).toBe('conversationId');
      expect(desk.cancellations).toHaveLength(0);
      expect(model.seen).toEqual([[]]); // one model request; no tool output went back
    });

    test(`${api}: streamText surfaces it (fullStream throws, text rejects); nothing ran`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const result = streamText({
        model: model.model(api),
        tools: fromContext(desk),
        toolsContext: { cancel_subscription: {} },
        prompt: PROMPT,
        stopWhen: isStepCount(5),
      });
      const parts: string[] = [];
      const thrown = await rejection(
        (async () => {
          for await (const part of result.fullStream) parts.push(part.type);
        })(),
      );
      expect(ConfigurationError.isInstance(thrown)).toBe(true);
      expect(ConfigurationError.isInstance(await rejection(result.text))).toBe(true);
      expect(parts).not.toContain('tool-result');
      expect(parts).not.toContain('tool-error');
      expect(desk.cancellations).toHaveLength(0);
      expect(model.seen).toEqual([[]]);
    });

    test(`${api}: with toolsContext passed (the recipe), the same wrapper tells chats apart`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const tools = fromContext(desk);
      for (const chatId of ['chat-a', 'chat-b', 'chat-a']) {
        await generateText({
          model: model.model(api),
          tools,
          toolsContext: { cancel_subscription: { chatId } },
          prompt: PROMPT,
          stopWhen: isStepCount(5),
        });
      }
      expect(desk.cancellations).toHaveLength(2);
    });
  }

  test('in a useChat route the response stream breaks with the error in the server log; no tool output reaches the client', async () => {
    const model = await scripted();
    const desk = supportDesk();
    const tools = fromContext(desk);
    const app = await startChatApp(async (body) =>
      streamText({
        model: model.model('chat'),
        tools,
        // A bug in the route: the body's chat id is `id`, not `chatId`.
        toolsContext: { cancel_subscription: { chatId: body.chatId as string | undefined } },
        messages: await convertToModelMessages(body.messages),
        stopWhen: isStepCount(5),
      }).toUIMessageStreamResponse(),
    );
    closing.push(app.close);
    const exchange = await new Chat(app.api, 'chat-a').send(PROMPT);
    expect(app.serverErrors).toHaveLength(1);
    expect(ConfigurationError.isInstance(app.serverErrors[0])).toBe(true);
    expect(exchange.errors.length).toBeGreaterThan(0); // the client sees the request fail
    expect(toolOutputs(exchange.message)).toEqual([]);
    expect(desk.cancellations).toHaveLength(0);
  });

  test('a turn id the executor refuses (too long) escapes generateText the same way', async () => {
    const model = await scripted();
    const desk = supportDesk();
    const error = await rejection(
      generateText({
        model: model.model('chat'),
        tools: idempotentTools(desk.tools, { store: createMemoryStore(), turnId: 'x'.repeat(600) }),
        prompt: PROMPT,
        stopWhen: isStepCount(5),
      }),
    );
    expect(InvalidInputError.isInstance(error)).toBe(true);
    expect((error as InvalidInputError).field).toBe('turnId');
    expect(desk.cancellations).toHaveLength(0);
    expect(model.seen).toEqual([[]]);
  });

  test('an approval resumed without the identity: generateText rejects; the tool did not run', async () => {
    const model = await scripted();
    const desk = supportDesk();
    // The tool asks for approval itself (needsApproval): the wrapper stores the request when the
    // model asks, so the approved call may run (generateText's toolApproval is not seen by it).
    const tools = idempotentTools(
      { cancel_subscription: { ...desk.withContext.cancel_subscription, needsApproval: true } },
      {
        store: createMemoryStore(),
        conversationId: ({ options }) => options.context?.chatId as string | undefined,
      },
    );
    const common = { model: model.model('chat'), tools, stopWhen: isStepCount(5) };
    const messages: ModelMessage[] = [{ role: 'user', content: PROMPT }];
    const asked = await generateText({
      ...common,
      toolsContext: { cancel_subscription: { chatId: 'chat-a' } },
      messages,
    });
    const request = asked.content.find((part) => part.type === 'tool-approval-request');
    expect(request).toBeDefined();
    messages.push(...asked.response.messages, {
      role: 'tool',
      content: [
        {
          type: 'tool-approval-response',
          approvalId: (request as { approvalId: string }).approvalId,
          approved: true,
        },
      ],
    });
    // Another process resumes the approved call without the chat id.
    const error = await rejection(
      generateText({ ...common, toolsContext: { cancel_subscription: {} }, messages }),
    );
    expect(ConfigurationError.isInstance(error)).toBe(true);
    expect(desk.cancellations).toHaveLength(0);
    // With the identity, the approved call runs once.
    await generateText({
      ...common,
      toolsContext: { cancel_subscription: { chatId: 'chat-a' } },
      messages,
    });
    expect(desk.cancellations).toHaveLength(1);
  });
});

describe('finding: a retry whose system prompt was rebuilt must keep its turn', () => {
  for (const api of APIS) {
    test(`${api}: the same turn sent again with a rebuilt system prompt replays: one cancellation`, async () => {
      const model = await scripted();
      const desk = supportDesk();
      const store = createMemoryStore();
      const run = (instructions: string) =>
        generateText({
          model: model.model(api),
          instructions,
          tools: idempotentTools(desk.tools, { store, conversationId: 'chat-a' }),
          prompt: PROMPT,
          stopWhen: isStepCount(5),
        });
      await run('You are a support agent. It is 09:00:00.');
      const retry = await run('You are a support agent. It is 09:00:07. Plan: gold.');
      expect(desk.cancellations).toHaveLength(1);
      expect(retry.steps[0]?.toolResults[0]?.output).toEqual({
        cancelled: true,
        refund: 're_1',
        replayed: true,
      });
    });
  }
});

describe('refused when the tools are wrapped', () => {
  const store = createMemoryStore();
  const { tools } = supportDesk();

  test('a bad policy, a misspelt option, a missing identity, a tool name with spaces', () => {
    const conversationId = 'chat-a';
    expect(
      configurationError(() =>
        idempotentTools(tools, {
          store,
          conversationId,
          policies: { cancel_subscription: { ttl: 0 } },
        }),
      ).option,
    ).toBe('policies.cancel_subscription.ttl');
    const typo = configurationError(() =>
      idempotentTools(tools, { store, conversationId, onstale: 'reexecute' } as never),
    );
    expect(typo.option).toBe('onstale');
    expect(typo.message).toContain('did you mean "onStale"?');
    expect(configurationError(() => idempotentTools(tools, { store })).option).toBe(
      'conversationId',
    );
    const spaced = { 'cancel subscription': tools.cancel_subscription };
    expect(
      configurationError(() => idempotentTools(spaced, { store, conversationId })).option,
    ).toBe('toolName');
  });

  test('no identity is needed when every wrapped tool has a business key, or for provider tools', () => {
    const webSearch = {
      type: 'provider',
      id: 'openai.web_search',
      isProviderExecuted: true,
      args: {},
      inputSchema: z.object({ q: z.string() }),
    } as unknown as Tool;
    const lookup = tool({ inputSchema: z.object({ id: z.string() }), execute: async () => ({}) });
    expect(() =>
      idempotentTools(
        { ...tools, web_search: webSearch, lookup },
        {
          store,
          policies: {
            cancel_subscription: { businessKey: (args: { request: string }) => args.request },
          },
          exclude: ['lookup'],
        },
      ),
    ).not.toThrow();
  });
});
