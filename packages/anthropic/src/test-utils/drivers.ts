/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter (the dispatcher in a hand-written loop,
 * or the SDK's tool runner), with the real SDK client against the scripted server.
 */
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages';
import type { TurnIdentityConversation, TurnIdentityDriver } from '@idempotent-tools/testing';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  createToolDispatcher,
} from '../index.js';
import { startScriptedServer } from '../testing/index.js';
import {
  client,
  dispatchTurn,
  runnerTurn,
  type TicketSystem,
  ticketArgs,
  ticketModel,
  ticketSystem,
  ticketTool,
} from './app.js';

export type Surface = 'dispatcher' | 'runner';

export function createDriver(surface: Surface, stream: boolean) {
  return async (): Promise<TurnIdentityDriver> => {
    const server = await startScriptedServer({ respond: ticketModel });
    const anthropic = client(server.baseURL);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const vendor = ticketSystem();
    const armed = { lose: false };
    // The reply of the request after the effect is cut (a broken stream, a cut body).
    const system: TicketSystem = {
      ...vendor,
      create(args) {
        const out = vendor.create(args);
        if (armed.lose) {
          armed.lose = false;
          server.inject('truncate');
        }
        return out;
      },
    };
    const dispatcher = createToolDispatcher(idempotency, {
      create_ticket: { schema: ticketArgs, execute: system.create },
    });
    const turn = (id: string | undefined, history: MessageParam[], prompt: string) =>
      surface === 'dispatcher'
        ? dispatchTurn(anthropic, dispatcher, history, {
            conversationId: id,
            stream,
            system: prompt,
          })
        : runnerTurn(
            anthropic,
            [ticketTool(system)],
            history,
            { idempotency, ...(id === undefined ? {} : { conversationId: id }) },
            { stream, system: prompt },
          );
    return {
      conversation(id): TurnIdentityConversation {
        let history: MessageParam[] = [];
        let before: MessageParam[] = [];
        let last = { text: '', system: '' };
        const say = async (text: string, prompt: string, resend: boolean, lose: boolean) => {
          last = { text, system: prompt };
          if (!resend) before = history;
          if (lose) armed.lose = true;
          // The app's own retry: the same history and user message again, after a failure.
          for (let attempt = 0; ; attempt++) {
            try {
              const sent: MessageParam[] = [...before, { role: 'user', content: text }];
              history = (await turn(id, sent, prompt)).messages;
              return;
            } catch (error) {
              if (ConfigurationError.isInstance(error) || attempt >= 2) throw error;
            }
          }
        };
        return {
          say: (text, o) => say(text, o?.system ?? 'You open tickets.', false, false),
          resend: (o) => say(last.text, o?.system ?? last.system, true, false),
          sayLosingReply: (text, o) => say(text, o?.system ?? 'You open tickets.', false, true),
        };
      },
      effects: () => vendor.tickets.length,
      close: () => server.close(),
    };
  };
}
