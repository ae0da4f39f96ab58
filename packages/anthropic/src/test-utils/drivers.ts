/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter (the dispatcher in a hand-written loop,
 * or the SDK's tool runner), with the real SDK client against the scripted server.
 */
import type { MessageParam } from '@anthropic-ai/sdk/resources/messages';
import { createMemoryStore } from '@idempotent-tools/core';
import {
  losingTicketSystem,
  retryTurn,
  type SayOptions,
  type TurnIdentityCaseOptions,
  type TurnIdentityConversation,
  type TurnIdentityDriver,
} from '@idempotent-tools/testing';
import { startScriptedServer } from '@idempotent-tools/testing/anthropic';
import {
  ConfigurationError,
  createIdempotency,
  createToolDispatcher,
  idempotentToolRunner,
} from '../index.js';
import {
  client,
  dispatchTurn,
  type LoopOptions,
  runnerTurn,
  type TicketSystem,
  ticketArgs,
  ticketModel,
  ticketTool,
  userMessage,
} from './app.js';

export type Surface = 'dispatcher' | 'runner';

/** What every surface supports of the optional cases. */
export const supports: NonNullable<TurnIdentityCaseOptions['supports']> = {
  shapes: ['string', 'blocks'],
  providerOptions: true,
  wrapTwice: true,
  methods: ['sayRepeatingCall', 'sayAnsweredByTool'],
};

/** How one attempt of a turn is run. */
interface Attempt extends LoopOptions {
  /** The turn ends on the tool results (the loop stops; the runner's `max_iterations: 1`). */
  answeredByTool?: boolean;
}

export function createDriver(surface: Surface, stream: boolean) {
  return async (): Promise<TurnIdentityDriver> => {
    // The scripted model calls create_ticket once per user turn; `repeat`: twice, one step apart.
    const model = { repeat: false };
    const server = await startScriptedServer({
      respond: (turn) =>
        model.repeat && turn.toolResults.length === 1
          ? { toolUses: [{ name: 'create_ticket', input: { title: turn.userText } }] }
          : ticketModel(turn),
    });
    const anthropic = client(server.baseURL);
    const idempotency = createIdempotency({ store: createMemoryStore() });
    // The reply of the request after the effect is cut (a broken stream, a cut body).
    const vendor = losingTicketSystem(() => server.inject('truncate'));
    const system: TicketSystem = vendor.system;
    return {
      ...supports,
      conversation(id, options): TurnIdentityConversation {
        const twice = options?.wrapTwice === true;
        const identity = { idempotency, ...(id === undefined ? {} : { conversationId: id }) };
        // Made idempotent twice: a handler that is `idempotency.wrap`'s function (refused when
        // the dispatcher is made), a runner made from another runner's tools (`params.tools`).
        const dispatcher =
          surface === 'dispatcher'
            ? createToolDispatcher(idempotency, {
                create_ticket: {
                  schema: ticketArgs,
                  execute: twice
                    ? (idempotency.wrap('create_ticket', system.create) as never)
                    : system.create,
                },
              })
            : undefined;
        const tools = () =>
          twice
            ? idempotentToolRunner(
                anthropic,
                { model: 'scripted', max_tokens: 1024, messages: [], tools: [ticketTool(system)] },
                identity,
              ).params.tools
            : [ticketTool(system)];
        const turn = (history: MessageParam[], attempt: Attempt) => {
          const loop = {
            stream,
            ...(attempt.system === undefined ? {} : { system: attempt.system }),
            ...(attempt.cacheEachStep === true && { cacheEachStep: true }),
          };
          const byTool = attempt.answeredByTool === true;
          return dispatcher !== undefined
            ? dispatchTurn(anthropic, dispatcher, history, {
                conversationId: id,
                ...loop,
                ...(byTool && { stopAfterTools: true }),
              })
            : runnerTurn(anthropic, tools(), history, identity, {
                ...loop,
                ...(byTool && { max_iterations: 1 }),
              });
        };

        let history: MessageParam[] = [];
        let before: MessageParam[] = [];
        let last = { text: '', system: '' };
        const say = async (
          text: string,
          o: SayOptions & Attempt & { resend?: boolean; lose?: boolean; repeat?: boolean } = {},
        ) => {
          const prompt = o.system ?? (o.resend ? last.system : 'You open tickets.');
          last = { text, system: prompt };
          if (!o.resend) before = history;
          if (o.lose) vendor.loseNextReply();
          model.repeat = o.repeat === true;
          const sent = [...before, userMessage(text, o.shape, o.providerOptions === true)];
          // The app's own retry: the same history and user message again, after a failure.
          await retryTurn(
            async () => {
              history = (await turn(sent, { ...o, system: prompt })).messages;
            },
            (error) => ConfigurationError.isInstance(error),
          );
        };
        return {
          say: (text, o) => say(text, o),
          resend: (o) => say(last.text, { ...o, resend: true }),
          sayLosingReply: (text, o) => say(text, { ...o, lose: true }),
          sayRepeatingCall: (text, o) => say(text, { ...o, repeat: true }),
          sayAnsweredByTool: (text) => say(text, { answeredByTool: true }),
        };
      },
      effects: () => vendor.tickets.length,
      close: () => server.close(),
    };
  };
}
