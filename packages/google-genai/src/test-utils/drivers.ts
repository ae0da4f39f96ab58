/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter with the real `@google/genai` client
 * against the scripted Gemini server.
 */
import type { Content } from '@google/genai';
import type { TurnIdentityConversation, TurnIdentityDriver } from '@idempotent-tools/testing';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  type Idempotency,
  type IdempotentFunctions,
  idempotentCallableTool,
  idempotentFunctions,
} from '../index.js';
import { startScriptedServer } from '../testing/index.js';
import {
  client,
  runTurn,
  type Surface,
  ticketArgs,
  ticketCallable,
  ticketDeclaration,
  ticketModel,
  ticketSystem,
} from './app.js';

export type Wrapping = 'functions' | 'callable';

/** The ticket system's functions, wrapped as local functions or as a wrapped CallableTool. */
export async function ticketFunctions(
  idempotency: Idempotency,
  system: ReturnType<typeof ticketSystem>,
  wrapping: Wrapping,
): Promise<IdempotentFunctions> {
  if (wrapping === 'callable')
    return idempotentCallableTool(ticketCallable(system), { idempotency });
  return idempotentFunctions(
    {
      create_ticket: {
        declaration: ticketDeclaration,
        schema: ticketArgs,
        execute: (args: { title: string; priority: string }) => system.create(args),
      },
    },
    { idempotency },
  );
}

export function driver(surface: Surface, wrapping: Wrapping = 'functions') {
  return async (): Promise<TurnIdentityDriver> => {
    const server = await startScriptedServer({ respond: ticketModel });
    const ai = client(server.baseUrl);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    const armed = { lose: false };
    const inner = ticketSystem();
    const system = {
      ...inner,
      create(args: { title: string; priority?: string }) {
        const out = inner.create(args);
        if (armed.lose) {
          armed.lose = false;
          server.inject('truncate'); // the reply to the next request (the function response) is cut
        }
        return out;
      },
    };
    const fns = await ticketFunctions(idempotency, system, wrapping);
    return {
      conversation(conversationId): TurnIdentityConversation {
        let history: Content[] = [];
        let last = { before: [] as Content[], text: '', system: '' };
        const turn = async (text: string, sys: string, resend: boolean, lose: boolean) => {
          const before = resend ? last.before : history;
          last = { before, text, system: sys };
          if (lose) armed.lose = true;
          for (let attempt = 0; ; attempt++) {
            try {
              history = await runTurn(ai, fns, surface, {
                history: before,
                text,
                system: sys,
                conversationId,
              });
              return;
            } catch (error) {
              if (ConfigurationError.isInstance(error) || attempt >= 2) throw error;
            }
          }
        };
        return {
          say: (text, o) => turn(text, o?.system ?? 'You open tickets.', false, false),
          resend: (o) => turn(last.text, o?.system ?? last.system, true, false),
          sayLosingReply: (text, o) => turn(text, o?.system ?? 'You open tickets.', false, true),
        };
      },
      effects: () => inner.tickets.length,
      close: () => server.close(),
    };
  };
}
