import { randomUUID } from 'node:crypto';
import type { TurnIdentityDriver } from '@idempotent-tools/testing';
import {
  convertToModelMessages,
  generateText,
  isStepCount,
  type ModelMessage,
  streamText,
} from 'ai';
import { createMemoryStore, idempotentTools } from '../index.js';
import { Chat, type Exchange, startChatApp } from './chat-app.js';
import { type Api, startScriptedModel, supportAgent } from './scripted-model.js';
import { supportDesk } from './support-desk.js';

/**
 * The identity cases through a `useChat` app: the route handler runs `streamText` over the real
 * `@ai-sdk/openai` client (streaming) with `idempotentTools(tools, { store, conversationId: id })`
 * (the chat id of the request body) and returns `toUIMessageStreamResponse()`; the client is the
 * AI SDK's `DefaultChatTransport`. A conversation without identity is an app that does not pass
 * the chat id. A lost reply is a broken model stream (fault `truncate`); the app retries it with
 * `regenerate()`, a rebuilt system prompt is the route's `system` body field.
 */
export function chatRouteDriver(api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const model = await startScriptedModel(supportAgent('cancel_subscription'));
    const store = createMemoryStore();
    const desk = supportDesk();
    const app = await startChatApp(async ({ id, messages, system, passChatId }) => {
      const tools = idempotentTools(desk.tools, {
        store,
        ...(passChatId === false ? {} : { conversationId: id }),
      });
      const result = streamText({
        model: model.model(api),
        ...(typeof system === 'string' ? { instructions: system } : {}),
        tools,
        messages: await convertToModelMessages(messages),
        stopWhen: isStepCount(5),
      });
      return result.toUIMessageStreamResponse();
    });
    /** What the developer sees: the error the route threw (its log), else the client's. */
    const settle = async (exchange: Promise<Exchange>, { lost = false } = {}) => {
      const before = app.serverErrors.length;
      let result: Exchange | undefined;
      try {
        result = await exchange;
      } catch (error) {
        throw app.serverErrors[before] ?? error;
      }
      if (lost) return; // the broken stream: the route logged it, the client saw it break
      if (app.serverErrors.length > before) throw app.serverErrors[before];
      if (result.errors.length > 0) throw result.errors[0];
    };
    return {
      conversation(id) {
        const chat = new Chat(app.api, id ?? randomUUID(), { passChatId: id !== undefined });
        const system = (options?: { system?: string }) =>
          options?.system === undefined ? {} : { system: options.system };
        return {
          say: (text, options) => settle(chat.send(text, system(options))),
          resend: (options) => settle(chat.regenerate(system(options))),
          async sayLosingReply(text, options) {
            // The tool call's request goes through; the answer's stream breaks.
            model.server.inject(undefined, 'truncate');
            await settle(chat.send(text, system(options)), { lost: true });
            await settle(chat.regenerate(system(options)));
          },
        };
      },
      effects: () => desk.cancellations.length,
      async close() {
        await app.close();
        await model.close();
      },
    };
  };
}

/**
 * The identity cases through `generateText` over the real `@ai-sdk/openai` client, the app
 * keeping each conversation's model messages and wrapping the tools per request with the
 * conversation id. A lost reply is a truncated response with the SDK's own retries off
 * (`maxRetries: 0`): the app sends the turn again.
 */
export function generateTextDriver(api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const model = await startScriptedModel(supportAgent('cancel_subscription'));
    const store = createMemoryStore();
    const desk = supportDesk();
    return {
      conversation(id) {
        const history: ModelMessage[] = [];
        const turn = async (options?: { system?: string }) => {
          const tools = idempotentTools(desk.tools, {
            store,
            ...(id === undefined ? {} : { conversationId: id }),
          });
          const result = await generateText({
            model: model.model(api),
            ...(options?.system === undefined ? {} : { instructions: options.system }),
            tools,
            messages: history,
            stopWhen: isStepCount(5),
            maxRetries: 0,
          });
          history.push(...result.response.messages);
        };
        const say = (text: string) => history.push({ role: 'user', content: text });
        return {
          say: async (text, options) => {
            say(text);
            await turn(options);
          },
          resend: async (options) => {
            history.splice(history.findLastIndex((m) => m.role === 'user') + 1);
            await turn(options);
          },
          async sayLosingReply(text, options) {
            model.server.inject(undefined, 'truncate');
            say(text);
            await turn(options).then(
              () => {
                throw new Error('the reply was expected to be lost');
              },
              () => {},
            );
            await turn(options);
          },
        };
      },
      effects: () => desk.cancellations.length,
      close: () => model.close(),
    };
  };
}
