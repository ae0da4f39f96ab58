import { createMemoryStore } from '@idempotent-tools/core';
import type { TurnIdentityDriver } from '@idempotent-tools/testing';
import { createAgent } from 'langchain';
import { idempotentToolsMiddleware } from '../middleware.js';
import { carryOut, chatModel, runAgent, startModelServer, type Transport } from './openai.js';

/** A chat message as the app's client posts it (no id: the server never saw one). */
type Posted = { role: 'user' | 'assistant'; content: string };

/**
 * The identity cases over `createAgent` + the middleware + `ChatOpenAI` + the scripted server.
 * The app is a chat backend: its client posts the conversation so far (user messages and the
 * answers it got) with the chat id, which the backend passes as the graph's `thread_id`.
 */
export function createAgentDriver(transport: Transport) {
  return async (): Promise<TurnIdentityDriver> => {
    const server = await startModelServer();
    const effects: string[] = [];
    const tools = [carryOut(effects)];
    const middleware = [idempotentToolsMiddleware({ store: createMemoryStore() })];
    return {
      conversation(chatId) {
        const config = chatId === undefined ? {} : { configurable: { thread_id: chatId } };
        let history: Posted[] = [];
        let request: Posted[] = [];
        /** One request of the client: the backend builds the agent (its system prompt) anew. */
        const send = async (system: string | undefined) => {
          const agent = createAgent({
            model: chatModel(server),
            tools,
            middleware,
            ...(system === undefined ? {} : { systemPrompt: system }),
          });
          const messages = request.map((m) => ({ ...m })); // parsed from the request body
          const out = await runAgent(agent, transport, { messages }, config);
          history = [...request, { role: 'assistant', content: out.messages.at(-1)?.text ?? '' }];
        };
        return {
          say: async (text, options) => {
            request = [...history, { role: 'user', content: text }];
            await send(options?.system);
          },
          resend: (options) => send(options?.system),
          sayLosingReply: async (text, options) => {
            request = [...history, { role: 'user', content: text }];
            // The model's first reply (the tool call) arrives; the one after the tool ran is cut.
            server.inject(undefined, 'truncate');
            const lost = await send(options?.system).then(
              () => false,
              () => true,
            );
            if (!lost) throw new Error('the reply was meant to be lost');
            await send(options?.system);
          },
        };
      },
      effects: () => effects.length,
      close: () => server.close(),
    };
  };
}
