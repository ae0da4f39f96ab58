import { ConfigurationError, createMemoryStore } from '@idempotent-tools/core';
import type { TurnIdentityDriver } from '@idempotent-tools/testing';
import { RequestContext } from '@mastra/core/request-context';
import { idempotentTools } from '../index.js';
import {
  type Api,
  carryOut,
  makeAgent,
  runAgent,
  startModelServer,
  type Transport,
} from './app.js';

/** A chat message as the app's client posts it. */
type Posted = { role: 'user' | 'assistant'; content: string };

/**
 * Mastra rethrows an error of `toModelOutput` as a copy that keeps `name`, `code`, `option` and
 * the message (not the class): both count as the developer's error.
 */
export const isDeveloperError = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ((error as { code?: unknown })?.code === 'configuration' &&
    (error as { name?: unknown }).name === 'ConfigurationError');

/**
 * The identity cases over a stateless chat backend: the client posts the conversation so far
 * (user messages and the answers it got) and its chat id, which the backend puts in Mastra's
 * `requestContext`; the tools take it as `conversationId`.
 */
export function postedHistoryDriver(transport: Transport, api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const server = await startModelServer();
    const effects: string[] = [];
    const tools = idempotentTools(
      { carry_out: carryOut(effects) },
      {
        store: createMemoryStore(),
        conversationId: ({ context }) =>
          (context.requestContext as RequestContext | undefined)?.get('chatId') as
            | string
            | undefined,
      },
    );
    return {
      conversation(chatId) {
        let history: Posted[] = [];
        let request: Posted[] = [];
        const send = async (system: string | undefined) => {
          const agent = makeAgent({
            server,
            tools,
            api,
            ...(system ? { instructions: system } : {}),
          });
          const requestContext = new RequestContext();
          if (chatId !== undefined) requestContext.set('chatId', chatId);
          const messages = request.map((m) => ({ ...m })); // parsed from the request body
          const out = await runAgent(agent, transport, messages, { requestContext });
          history = [...request, { role: 'assistant', content: out.text }];
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
