import { ConfigurationError, createMemoryStore } from '@idempotent-tools/core';
import type { SayOptions, TurnIdentityDriver } from '@idempotent-tools/testing';
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  mapChatMessagesToStoredMessages,
  mapStoredMessagesToChatMessages,
  type StoredMessage,
  ToolMessage,
} from '@langchain/core/messages';
import { type AgentMiddleware, createAgent, createMiddleware } from 'langchain';
import { idempotentToolsMiddleware } from '../middleware.js';
import { idempotentTools } from '../tools.js';
import {
  carryOut,
  chatModel,
  type ModelScript,
  runAgent,
  startModelServer,
  type Transport,
} from './openai.js';

/**
 * How a chat backend builds the user's message from the request: a `HumanMessage` with the text
 * (`string`), a `HumanMessage` with content blocks (`blocks`), or the plain `{ role, content }`
 * object LangChain coerces (`object`).
 */
export const SHAPES = ['string', 'blocks', 'object'] as const;

const CACHE = { type: 'ephemeral' } as const;
let attempts = 0;

/**
 * The user's message as the backend builds it for one attempt. With provider options, the text
 * is a block with a cache breakpoint, the message has an id of this attempt, kwargs and metadata.
 */
function userMessage(text: string, options: SayOptions = {}): unknown {
  const shape = options.shape ?? 'string';
  const extras = options.providerOptions === true;
  const content =
    extras || shape === 'blocks'
      ? [{ type: 'text', text, ...(extras ? { cache_control: CACHE } : {}) }]
      : text;
  const id = `msg-attempt-${++attempts}`;
  if (shape === 'object') return { role: 'user', content, ...(extras ? { id } : {}) };
  return new HumanMessage({
    content: content as HumanMessage['content'],
    ...(extras
      ? {
          id,
          additional_kwargs: { attempt: attempts },
          response_metadata: { received: `09:00:0${attempts % 10}` },
        }
      : {}),
  });
}

/** What the app's client keeps of a run: the messages it got, as stored JSON (ids and all). */
const stored = (messages: BaseMessage[]): StoredMessage[] =>
  JSON.parse(JSON.stringify(mapChatMessagesToStoredMessages(messages)));

/** `content` with a cache breakpoint on its last block, or without any. */
function withCache(content: unknown, on: boolean): unknown {
  const blocks =
    typeof content === 'string' ? [{ type: 'text', text: content }] : (content as object[]);
  if (!Array.isArray(blocks)) return content;
  return blocks.map((block, i) => {
    const { cache_control: _, ...rest } = block as Record<string, unknown>;
    return on && i === blocks.length - 1 ? { ...rest, cache_control: CACHE } : rest;
  });
}

/** The same message (class, id, fields) with `content`. */
function recontent(message: BaseMessage, content: unknown): BaseMessage {
  const fields = { ...message, content } as never;
  if (ToolMessage.isInstance(message)) return new ToolMessage(fields);
  if (AIMessage.isInstance(message)) return new AIMessage(fields);
  return new HumanMessage(fields);
}

/**
 * The app moves its cache breakpoint onto the last message before every model call, taking it off
 * the others (the state keeps the change: LangGraph replaces a message by its id).
 */
const movingCacheBreakpoint = () =>
  createMiddleware({
    name: 'MovingCacheBreakpoint',
    beforeModel: (state) => {
      const messages = state.messages as BaseMessage[];
      return {
        messages: messages.map((m, i) =>
          recontent(m, withCache(m.content, i === messages.length - 1)),
        ),
      };
    },
  });

/**
 * The identity cases over `createAgent` + the middleware + `ChatOpenAI` + the scripted server.
 * The app is a chat backend without a checkpointer: its client posts the conversation so far
 * (the user messages it sent and the messages it got back, as stored JSON) with the chat id,
 * which the backend passes as the graph's `thread_id`. The agent has `carry_out` and
 * `carry_out_now` (`returnDirect`: its receipt is the answer); the scripted model picks one.
 */
export function createAgentDriver(transport: Transport) {
  return async (): Promise<TurnIdentityDriver> => {
    const script: ModelScript = {};
    const server = await startModelServer(script);
    const effects: string[] = [];
    const tools = () => [carryOut(effects), carryOut(effects, { returnDirect: true })];
    const middleware = idempotentToolsMiddleware({ store: createMemoryStore() });
    const own = tools();
    return {
      shapes: SHAPES,
      providerOptions: true,
      wrapTwice: true,
      conversation(chatId, conversationOptions) {
        const config = chatId === undefined ? {} : { configurable: { thread_id: chatId } };
        /** What the client keeps, and what it kept before the last turn (a retry resends that). */
        let history: StoredMessage[] = [];
        let before: StoredMessage[] = [];
        let words = '';
        let request: unknown[] = [];
        /** One request of the client: the backend builds the agent (its system prompt) anew. */
        const send = async (
          options: SayOptions & { cacheEachStep?: boolean } = {},
          model: ModelScript = {},
        ) => {
          const agent = createAgent({
            model: chatModel(server),
            tools: own,
            middleware: [
              ...(options.cacheEachStep === true ? [movingCacheBreakpoint()] : []),
              middleware,
            ] as AgentMiddleware[],
            ...(options.system === undefined ? {} : { systemPrompt: options.system }),
          });
          Object.assign(script, { tool: undefined, repeat: undefined }, model);
          const messages = [...mapStoredMessagesToChatMessages(before), ...request];
          const out = await runAgent(agent, transport, { messages }, config);
          return out.messages.slice(messages.length);
        };
        /** A user turn: the words in the request, the messages the client got kept. */
        const turn = async (
          text: string,
          options: SayOptions & { cacheEachStep?: boolean } = {},
          model: ModelScript = {},
        ) => {
          words = text;
          before = history;
          request = [userMessage(text, options)];
          const got = await send(options, model);
          history = [...before, ...stored([toMessage(request[0]), ...got])];
        };
        if (conversationOptions?.wrapTwice === true) {
          return { say: (text) => wrappedTwice(text), resend: fail, sayLosingReply: fail };
        }
        return {
          say: (text, options) => turn(text, options),
          resend: async (options) => {
            request = [userMessage(words, options)];
            await send(options);
          },
          sayLosingReply: async (text, options) => {
            words = text;
            before = history;
            request = [userMessage(text, options)];
            // The model's first reply (the tool call) arrives; the one after the tool ran is cut.
            server.inject(undefined, 'truncate');
            const lost = await send(options).then(
              () => false,
              () => true,
            );
            if (!lost) throw new Error('the reply was meant to be lost');
            await send(options);
          },
          sayRepeatingCall: (text, options) =>
            turn(text, { cacheEachStep: options?.cacheEachStep === true }, { repeat: true }),
          sayAnsweredByTool: (text) => turn(text, {}, { tool: 'carry_out_now' }),
        };

        /**
         * The app made its tools idempotent twice, both ways: `idempotentTools` over tools that
         * `idempotentTools` returned, and the middleware over them. Refused when each way wraps
         * (the first: when the tools are wrapped; the second: before the first model call).
         */
        async function wrappedTwice(text: string) {
          const errors: unknown[] = [];
          const once = () => idempotentTools(tools(), { store: createMemoryStore() });
          const ways = [
            async () => idempotentTools(once(), { store: createMemoryStore() }),
            () =>
              runAgent(
                createAgent({ model: chatModel(server), tools: once(), middleware: [middleware] }),
                transport,
                { messages: [new HumanMessage(text)] },
                config,
              ),
          ];
          for (const way of ways) {
            const error = await way().then(
              () => undefined,
              (e: unknown) => e,
            );
            if (error === undefined) return; // not refused: the case fails
            errors.push(error);
          }
          throw errors.find((e) => !isRefusal(e)) ?? errors[0];
        }
      },
      effects: () => effects.length,
      close: () => server.close(),
    };
  };
}

/**
 * A developer-facing refusal as `agent.invoke` surfaces it: the `ConfigurationError`, or
 * LangChain's `MiddlewareError` around it (what a middleware hook threw, as its `cause`).
 */
export const isRefusal = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ConfigurationError.isInstance((error as { cause?: unknown } | null)?.cause);

const fail = () =>
  Promise.reject(new Error('not a case of a conversation with tools wrapped twice'));

/** A message the backend built, as a message (a plain `{ role, content }` object coerced). */
function toMessage(message: unknown): BaseMessage {
  if (message instanceof HumanMessage) return message;
  const { content, id } = message as { content: HumanMessage['content']; id?: string };
  return new HumanMessage({ content, ...(id === undefined ? {} : { id }) });
}
