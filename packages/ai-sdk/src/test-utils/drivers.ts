import { randomUUID } from 'node:crypto';
import { createMemoryStore } from '@idempotent-tools/core';
import type {
  SayOptions,
  TurnIdentityCaseOptions,
  TurnIdentityConversation,
  TurnIdentityDriver,
} from '@idempotent-tools/testing';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/openai';
import {
  convertToModelMessages,
  generateText,
  isStepCount,
  type ModelMessage,
  type PrepareStepFunction,
  streamText,
  type ToolSet,
  type UIMessage,
} from 'ai';
import { type IdempotentToolsOptions, idempotentTools } from '../index.js';
import { Chat, type Exchange, startChatApp, textOf, toolOutputs } from './chat-app.js';
import { type Api, startScriptedModel } from './scripted-model.js';
import { supportDesk } from './support-desk.js';

type Supports = NonNullable<TurnIdentityCaseOptions['supports']>;

/** What the drivers support of the shared identity cases (`runTurnIdentityCases`' `supports`). */
export const GENERATE_TEXT_SUPPORTS: Supports = {
  shapes: ['string', 'parts'],
  providerOptions: true,
  wrapTwice: true,
  methods: ['sayRepeatingCall', 'sayAnsweredByTool'],
};
export const CHAT_ROUTE_SUPPORTS: Supports = {
  shapes: ['parts', 'parts-with-provider-metadata'],
  providerOptions: true,
  wrapTwice: true,
  methods: ['sayRepeatingCall', 'sayAnsweredByTool'],
};

/** Anthropic's cache breakpoint, as AI SDK apps add it (`providerOptions`). */
const CACHE = { anthropic: { cacheControl: { type: 'ephemeral' } } } as const;

/**
 * The scripted support agent: on each user turn it calls `cancel_subscription` once with the
 * user's words, then answers with what the tool returned. While `repeating`, it calls the tool
 * again with the same input in the next step (the common glitch), then answers.
 */
function supportScript() {
  const state = { repeating: false };
  const respond = (turn: ModelTurn): ScriptedReply => {
    const calls = turn.toolOutputs.length;
    if (calls === 0 || (state.repeating && calls === 1)) {
      return {
        toolCalls: [{ name: 'cancel_subscription', arguments: { request: turn.userText } }],
      };
    }
    return { content: `Done. ${turn.toolOutputs.join(' ')}` };
  };
  return { state, respond };
}

/**
 * The AI SDK's documented Anthropic caching pattern, as `prepareStep`: before each step the
 * cache breakpoint moves onto the last message (message level, and its last part), off the others.
 */
function moveBreakpoint(steps: { count: number }): PrepareStepFunction<ToolSet> {
  return ({ messages }) => {
    steps.count++;
    const uncached = messages.map((message) => {
      const { providerOptions: _, ...rest } = message;
      if (typeof rest.content === 'string') return rest as ModelMessage;
      const content = rest.content.map((part) => {
        const { providerOptions: __, ...other } = part as typeof part & {
          providerOptions?: unknown;
        };
        return other;
      });
      return { ...rest, content } as ModelMessage;
    });
    const last = uncached.at(-1);
    if (last === undefined) return { messages: uncached };
    const content =
      typeof last.content === 'string'
        ? last.content
        : last.content.map((part, index, all) =>
            index === all.length - 1 ? { ...part, providerOptions: CACHE } : part,
          );
    return {
      messages: [
        ...uncached.slice(0, -1),
        { ...last, content, providerOptions: CACHE } as ModelMessage,
      ],
    };
  };
}

/** The tools as the app wraps them per request (twice, for `wrapTwice`: refused). */
function wrapDesk(
  tools: ToolSet,
  options: IdempotentToolsOptions<ToolSet>,
  wrapTwice: boolean | undefined,
): ToolSet {
  const once = idempotentTools(tools, options);
  return wrapTwice === true ? idempotentTools(once, options) : once;
}

/**
 * The user's message as a model message: the words as a string or as one text part; with
 * provider options, a cache breakpoint on the message and on its text part (a string cannot
 * carry a part's breakpoint, so an app that adds one sends the words as a part).
 */
function userMessage(text: string, options: SayOptions = {}): ModelMessage {
  if (options.providerOptions === true) {
    return {
      role: 'user',
      content: [{ type: 'text', text, providerOptions: CACHE }],
      providerOptions: CACHE,
    };
  }
  return {
    role: 'user',
    content: options.shape === 'parts' ? [{ type: 'text', text }] : text,
  };
}

/** The user's message as useChat holds it: text parts, with or without `providerMetadata`. */
function userParts(text: string, options: SayOptions = {}): UIMessage['parts'] {
  return options.shape === 'parts-with-provider-metadata'
    ? [{ type: 'text', text, providerMetadata: CACHE }]
    : [{ type: 'text', text }];
}

/**
 * The identity cases through a `useChat` app: the route handler runs `streamText` over the real
 * `@ai-sdk/openai` client (streaming) with `idempotentTools(tools, { store, conversationId: id })`
 * (the chat id of the request body) and returns `toUIMessageStreamResponse()`; the client is the
 * AI SDK's `DefaultChatTransport`. A conversation without identity is an app that does not pass
 * the chat id. A lost reply is a broken model stream (fault `truncate`); the app retries it with
 * `regenerate()` (which drops the partial assistant message the broken stream left), a rebuilt
 * system prompt is the route's `system` body field. Provider options are added by the route
 * (body `cache`: a breakpoint on the last user model message), the shapes are the user message's
 * text parts with or without `providerMetadata`; `cacheEachStep` is the route's `prepareStep`;
 * answered by the tool is a route that stops after the tool (`stopWhen: isStepCount(1)`).
 */
export function chatRouteDriver(api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const script = supportScript();
    const model = await startScriptedModel(script.respond);
    const store = createMemoryStore();
    const desk = supportDesk();
    const steps = { count: 0 };
    const app = await startChatApp(async (request) => {
      const { id, messages, system, passChatId, cache, cacheEachStep, stopAfterTool, wrapTwice } =
        request;
      const tools = wrapDesk(
        desk.tools,
        { store, ...(passChatId === false ? {} : { conversationId: id }) },
        wrapTwice === true,
      );
      const modelMessages = await convertToModelMessages(messages);
      const lastUser = modelMessages.findLastIndex((m) => m.role === 'user');
      const said = modelMessages[lastUser];
      if (cache === true && said !== undefined && typeof said.content !== 'string') {
        // The app's cache breakpoint on the user's message (message and part level).
        modelMessages[lastUser] = {
          ...said,
          content: said.content.map((part) => ({ ...part, providerOptions: CACHE })),
          providerOptions: CACHE,
        } as ModelMessage;
      }
      const result = streamText({
        model: model.model(api),
        ...(typeof system === 'string' ? { instructions: system } : {}),
        tools,
        messages: modelMessages,
        stopWhen: isStepCount(stopAfterTool === true ? 1 : 5),
        ...(cacheEachStep === true ? { prepareStep: moveBreakpoint(steps) } : {}),
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
      if (lost) return result; // the broken stream: the route logged it, the client saw it break
      if (app.serverErrors.length > before) throw app.serverErrors[before];
      if (result.errors.length > 0) throw result.errors[0];
      return result;
    };
    return {
      conversation(id, options) {
        const chat = new Chat(app.api, id ?? randomUUID(), {
          passChatId: id !== undefined,
          ...(options?.wrapTwice === true ? { wrapTwice: true } : {}),
        });
        const body = (say?: SayOptions) => ({
          ...(say?.system === undefined ? {} : { system: say.system }),
          ...(say?.providerOptions === true ? { cache: true } : {}),
        });
        const send = (text: string, say?: SayOptions, extra: Record<string, unknown> = {}) =>
          chat.send(userParts(text, say), { ...body(say), ...extra });
        const conversation: TurnIdentityConversation = {
          say: async (text, say) => void (await settle(send(text, say))),
          async resend(say) {
            // The same user message, rebuilt in the shape asked for (the client re-sends it).
            const last = chat.messages.findLast((m) => m.role === 'user');
            if (last !== undefined) last.parts = userParts(textOf(last), say);
            await settle(chat.regenerate(body(say)));
          },
          async sayLosingReply(text, say) {
            // The tool call's request goes through; the answer's stream breaks.
            model.server.inject(undefined, 'truncate');
            await settle(send(text, say), { lost: true });
            await settle(chat.regenerate(body(say)));
          },
          async sayRepeatingCall(text, repeat) {
            script.state.repeating = true;
            const before = steps.count;
            try {
              const { message } = await settle(
                send(
                  text,
                  undefined,
                  repeat?.cacheEachStep === true ? { cacheEachStep: true } : {},
                ),
              );
              const outputs = toolOutputs(message);
              if (outputs.length !== 2)
                throw new Error(`the model was to call twice: ${outputs.length}`);
              if (repeat?.cacheEachStep === true && steps.count - before < 3) {
                throw new Error('prepareStep was to move the breakpoint before each of 3 steps');
              }
            } finally {
              script.state.repeating = false;
            }
          },
          async sayAnsweredByTool(text) {
            const { message } = await settle(send(text, undefined, { stopAfterTool: true }));
            if (toolOutputs(message).length !== 1 || textOf(message) !== '') {
              throw new Error('the turn was to end with the tool result, no text');
            }
          },
        };
        return conversation;
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
 * (`maxRetries: 0`): the app sends the turn again. Shapes: the user message's content as a
 * string or as text parts; provider options: a cache breakpoint on the user message and its text
 * part; `cacheEachStep`: the app's `prepareStep` moving the breakpoint onto the last message;
 * answered by the tool: generateText's default single step (no `stopWhen`).
 */
export function generateTextDriver(api: Api) {
  return async (): Promise<TurnIdentityDriver> => {
    const script = supportScript();
    const model = await startScriptedModel(script.respond);
    const store = createMemoryStore();
    const desk = supportDesk();
    const steps = { count: 0 };
    return {
      conversation(id, options) {
        const history: ModelMessage[] = [];
        let said = '';
        const turn = async (
          say?: SayOptions,
          settings: { stopWhen?: ReturnType<typeof isStepCount>; cacheEachStep?: boolean } = {
            stopWhen: isStepCount(5),
          },
        ) => {
          const tools = wrapDesk(
            desk.tools,
            { store, ...(id === undefined ? {} : { conversationId: id }) },
            options?.wrapTwice,
          );
          const result = await generateText({
            model: model.model(api),
            ...(say?.system === undefined ? {} : { instructions: say.system }),
            tools,
            messages: history,
            ...(settings.stopWhen === undefined ? {} : { stopWhen: settings.stopWhen }),
            ...(settings.cacheEachStep === true ? { prepareStep: moveBreakpoint(steps) } : {}),
            maxRetries: 0,
          });
          history.push(...result.response.messages);
          return result;
        };
        const say = (text: string, options?: SayOptions) => {
          said = text;
          history.push(userMessage(text, options));
        };
        return {
          say: async (text, options) => {
            say(text, options);
            await turn(options);
          },
          resend: async (options) => {
            // The same user message, rebuilt as asked; what came after it is dropped.
            history.splice(history.findLastIndex((m) => m.role === 'user'));
            say(said, options);
            await turn(options);
          },
          async sayLosingReply(text, options) {
            model.server.inject(undefined, 'truncate');
            say(text, options);
            await turn(options).then(
              () => {
                throw new Error('the reply was expected to be lost');
              },
              () => {},
            );
            await turn(options);
          },
          async sayRepeatingCall(text, repeat) {
            script.state.repeating = true;
            const before = steps.count;
            try {
              say(text);
              const result = await turn(undefined, {
                stopWhen: isStepCount(5),
                cacheEachStep: repeat?.cacheEachStep === true,
              });
              const calls = result.steps.flatMap((step) => step.toolResults);
              if (calls.length !== 2)
                throw new Error(`the model was to call twice: ${calls.length}`);
              if (repeat?.cacheEachStep === true && steps.count - before < 3) {
                throw new Error('prepareStep was to move the breakpoint before each of 3 steps');
              }
            } finally {
              script.state.repeating = false;
            }
          },
          async sayAnsweredByTool(text) {
            say(text);
            // generateText's default: one step (no stopWhen); the turn ends with the tool result.
            const result = await turn(undefined, {});
            if (result.toolResults.length !== 1 || result.text !== '') {
              throw new Error('the turn was to end with the tool result, no text');
            }
          },
        };
      },
      effects: () => desk.cancellations.length,
      close: () => model.close(),
    };
  };
}
