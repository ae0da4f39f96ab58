/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter with the real `@google/genai` client
 * against the scripted Gemini server.
 */
import type { Content } from '@google/genai';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  losingTicketSystem,
  retryTurn,
  type SayOptions,
  type TurnIdentityCaseOptions,
  type TurnIdentityConversation,
  type TurnIdentityDriver,
} from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/gemini';
import {
  ConfigurationError,
  createIdempotency,
  type Idempotency,
  type IdempotentFunctions,
  idempotentCallableTool,
  idempotentFunctions,
} from '../index.js';
import {
  client,
  runTurn,
  type Shape,
  type Surface,
  ticketArgs,
  ticketCallable,
  ticketDeclaration,
  ticketModel,
  type ticketSystem,
} from './app.js';

export type Wrapping = 'functions' | 'callable';

/**
 * The ticket system's functions, wrapped as local functions or as a wrapped CallableTool.
 * `twice`: made idempotent twice, as an app can by mistake: a handler whose `execute` is
 * `idempotency.wrap`'s function, or a callable of idempotent functions wrapped again.
 */
export async function ticketFunctions(
  idempotency: Idempotency,
  system: ReturnType<typeof ticketSystem>,
  wrapping: Wrapping,
  twice = false,
): Promise<IdempotentFunctions> {
  if (wrapping === 'callable') {
    const once = await idempotentCallableTool(ticketCallable(system), { idempotency });
    if (!twice) return once;
    return idempotentCallableTool(once.callable({ turnId: 'turn-1' }), { idempotency });
  }
  const create = (args: { title: string; priority: string }) => system.create(args);
  return idempotentFunctions(
    {
      create_ticket: {
        declaration: ticketDeclaration,
        schema: ticketArgs,
        execute: twice ? (idempotency.wrap('create_ticket', create) as never) : create,
      },
    },
    { idempotency },
  );
}

/** What a surface supports of the optional cases (no provider options: Gemini parts have none). */
export function supportsOf(surface: Surface): NonNullable<TurnIdentityCaseOptions['supports']> {
  const chat = surface === 'chat' || surface === 'chat-afc';
  return {
    shapes: chat ? ['string', 'parts'] : ['content', 'string', 'parts'],
    wrapTwice: true,
    // Streamed AFC sends the function responses to the model even at `maximumRemoteCalls: 1`.
    methods:
      surface === 'afc-stream' ? ['sayRepeatingCall'] : ['sayRepeatingCall', 'sayAnsweredByTool'],
  };
}

export function driver(surface: Surface, wrapping: Wrapping = 'functions') {
  return async (): Promise<TurnIdentityDriver> => {
    // The scripted model calls create_ticket once per user turn; `repeat`: twice, one step apart.
    const model = { repeat: false };
    const server = await startScriptedServer({
      respond: (turn) =>
        model.repeat && turn.functionResponses.length === 1
          ? { functionCalls: [{ name: 'create_ticket', args: { title: turn.userText } }] }
          : ticketModel(turn),
    });
    const ai = client(server.baseUrl);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    // The reply to the next request (the function response) is cut.
    const vendor = losingTicketSystem(() => server.inject('truncate'));
    const system = vendor.system;
    const fns = await ticketFunctions(idempotency, system, wrapping);
    return {
      ...supportsOf(surface),
      async conversation(conversationId, options): Promise<TurnIdentityConversation> {
        const mine = options?.wrapTwice
          ? await ticketFunctions(idempotency, system, wrapping, true)
          : fns;
        let history: Content[] = [];
        let last = { before: [] as Content[], text: '', system: '' };
        type Attempt = SayOptions & {
          resend?: boolean;
          lose?: boolean;
          repeat?: boolean;
          answeredByTool?: boolean;
        };
        const turn = async (text: string, o: Attempt) => {
          const sys = o.system ?? (o.resend ? last.system : 'You open tickets.');
          const before = o.resend ? last.before : history;
          last = { before, text, system: sys };
          if (o.lose) vendor.loseNextReply();
          model.repeat = o.repeat === true;
          await retryTurn(
            async () => {
              history = await runTurn(ai, mine, surface, {
                history: before,
                text,
                system: sys,
                conversationId,
                shape: o.shape as Shape | undefined,
                answeredByTool: o.answeredByTool,
              });
            },
            (error) => ConfigurationError.isInstance(error),
          );
        };
        return {
          say: (text, o) => turn(text, { ...o }),
          resend: (o) => turn(last.text, { ...o, resend: true }),
          sayLosingReply: (text, o) => turn(text, { ...o, lose: true }),
          sayRepeatingCall: (text) => turn(text, { repeat: true }),
          sayAnsweredByTool: (text) => turn(text, { answeredByTool: true }),
        };
      },
      effects: () => vendor.tickets.length,
      close: () => server.close(),
    };
  };
}
