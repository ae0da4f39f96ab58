/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter, with the real `openai` client against
 * the scripted server, JSON or streamed.
 */
import { createMemoryStore } from '@idempotent-tools/core';
import type {
  SayOptions,
  TurnIdentityConversation,
  TurnIdentityDriver,
} from '@idempotent-tools/testing';
import {
  type ModelTurn,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ResponseInput, ResponseInputItem } from 'openai/resources/responses/responses';
import type { z } from 'zod';
import {
  ConfigurationError,
  createIdempotency,
  createToolDispatcher,
  type Idempotency,
} from '../index.js';
import { chatTools, responsesTools, ticketArgs, ticketSystem } from './app.js';

/** The developer's error as the framework surfaces it (the Agents SDK wraps it in a ToolCallError). */
export const isDeveloperError = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ConfigurationError.isInstance((error as { error?: unknown } | undefined)?.error);

/** How the user's message is sent: a string, text parts, or a `type: 'message'` item. */
type Shape = 'string' | 'parts' | 'items';

/** One attempt of a user turn, as a surface sends it. */
interface Turn {
  text: string;
  system: string;
  shape: Shape;
  /** The user message carries a prompt cache breakpoint. */
  cache: boolean;
  /** The same turn sent again (the history before it, without the first attempt's answer). */
  resend: boolean;
  /**
   * `answer`: the model calls the tool, then answers; `repeat`: it repeats its call in the next
   * step, then answers; `tool`: the app stops after the tool outputs (no answer from the model).
   */
  mode: 'answer' | 'repeat' | 'tool';
  /** Move the cache breakpoint onto the last message before every step. */
  cacheEachStep: boolean;
}

type Say = (turn: Turn) => Promise<void>;

interface App {
  server: ScriptedServer;
  openai: OpenAI;
  idempotency: Idempotency;
  system: ReturnType<typeof ticketSystem>;
  /** The scripted model repeats its call once in the next step. */
  repeat: boolean;
  /** How many function calls the scripted model emitted. */
  emitted: number;
  /** Cut the reply of the request after the next effect (a broken stream, a cut body). */
  loseNextReply(): void;
}

/** OpenAI's prompt cache breakpoint on a content part (Chat and Responses). */
const BREAKPOINT = { prompt_cache_breakpoint: { mode: 'explicit' } } as const;

type Part = Record<string, unknown>;
type Marking = 'field' | 'providerData';
const mark = (part: Part, how: Marking): Part =>
  how === 'field' ? { ...part, ...BREAKPOINT } : { ...part, providerData: BREAKPOINT };
const unmark = (part: Part): Part => {
  const { prompt_cache_breakpoint: _, providerData: __, ...rest } = part;
  return rest;
};

/**
 * The messages with the cache breakpoint moved onto the last one (its content, or the output of
 * a function call output), taken off every other (the AI SDK's `prepareStep` pattern).
 */
function cacheLast<T>(items: readonly T[], textType: string, how: Marking): T[] {
  return items.map((item, index) => {
    const entry = item as Part;
    const last = index === items.length - 1;
    const field =
      entry.content != null
        ? 'content'
        : typeof entry.output === 'string' && how === 'field'
          ? 'output'
          : undefined;
    if (field === undefined) return item;
    const value = entry[field];
    let parts: Part[] | undefined =
      typeof value === 'string'
        ? last
          ? [{ type: textType, text: value }]
          : undefined
        : Array.isArray(value)
          ? (value as Part[]).map(unmark)
          : undefined;
    if (parts === undefined) return item;
    if (last && parts.length > 0) {
      parts = [...parts.slice(0, -1), mark(parts.at(-1) as Part, how)];
    }
    return { ...entry, [field]: parts } as T;
  });
}

/** A user message: a string content, text parts, or a `type: 'message'` item (of any API). */
function userMessage(turn: Turn, textType: string, how: Marking): never {
  const parts = [
    turn.cache
      ? mark({ type: textType, text: turn.text }, how)
      : { type: textType, text: turn.text },
  ];
  if (turn.shape === 'items') return { type: 'message', role: 'user', content: parts } as never;
  if (turn.shape === 'parts' || turn.cache) return { role: 'user', content: parts } as never;
  return { role: 'user', content: turn.text } as never;
}

/** A driver whose conversations are made by `conversation(app, id, options)`. */
function driver(
  conversation: (app: App, id: string | undefined, options: { wrapTwice?: boolean }) => Say,
) {
  return async (): Promise<TurnIdentityDriver> => {
    const app = { repeat: false, emitted: 0 } as App;
    const server = await startScriptedServer({
      // Opens a ticket titled with the user's words once per turn (twice when it repeats the
      // call), then answers.
      respond: (turn: ModelTurn) => {
        if (turn.toolOutputs.length >= (app.repeat ? 2 : 1)) {
          return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
        }
        app.emitted++;
        return { toolCalls: [{ name: 'create_ticket', arguments: { title: turn.userText } }] };
      },
    });
    const armed = { lose: false };
    const system = ticketSystem();
    Object.assign(app, {
      server,
      openai: new OpenAI({ apiKey: 'test', baseURL: server.baseURL, maxRetries: 0 }),
      idempotency: createIdempotency({ store: createMemoryStore() }),
      system: {
        ...system,
        create(args: z.infer<typeof ticketArgs>) {
          const out = system.create(args);
          if (armed.lose) {
            armed.lose = false;
            server.inject('truncate');
          }
          return out;
        },
      },
      loseNextReply: () => {
        armed.lose = true;
      },
    });
    return {
      conversation(id, options = {}): TurnIdentityConversation {
        const say = conversation(app, id, options);
        const fresh = (text: string, o: SayOptions | undefined, mode: Turn['mode']): Turn => ({
          text,
          system: o?.system ?? 'You open tickets.',
          shape: (o?.shape ?? 'string') as Shape,
          cache: o?.providerOptions === true,
          resend: false,
          mode,
          cacheEachStep: false,
        });
        let last = fresh('', undefined, 'answer');
        const turn = async (attempt: Turn, lose = false) => {
          last = attempt;
          if (lose) app.loseNextReply();
          app.repeat = attempt.mode === 'repeat';
          const emitted = app.emitted;
          try {
            for (let round = 0; ; round++) {
              try {
                await say({ ...attempt, resend: attempt.resend || round > 0 });
                break;
              } catch (error) {
                if (isDeveloperError(error) || round >= 2) throw error;
              }
            }
            // The case is what it says: the model did repeat its call.
            if (attempt.mode === 'repeat' && app.emitted - emitted < 2) {
              throw new Error('the scripted model did not repeat its call');
            }
          } finally {
            app.repeat = false;
          }
        };
        return {
          say: (text, o) => turn(fresh(text, o, 'answer')),
          resend: (o) =>
            turn({
              ...fresh(last.text, o, last.mode),
              system: o?.system ?? last.system,
              resend: true,
            }),
          sayLosingReply: (text, o) => turn(fresh(text, o, 'answer'), true),
          sayRepeatingCall: (text, o) =>
            turn({ ...fresh(text, undefined, 'repeat'), cacheEachStep: o?.cacheEachStep === true }),
          sayAnsweredByTool: (text) => turn(fresh(text, undefined, 'tool')),
        };
      },
      effects: () => system.tickets.length,
      close: () => server.close(),
    };
  };
}

/** The ticket tool as a dispatcher handler; `wrapTwice`: made idempotent by the app already. */
const handlers = (app: App, wrapTwice = false) => ({
  create_ticket: wrapTwice
    ? app.idempotency.wrap('create_ticket', (args: z.infer<typeof ticketArgs>) =>
        app.system.create(ticketArgs.parse(args)),
      )
    : {
        schema: ticketArgs,
        execute: (args: z.infer<typeof ticketArgs>) => app.system.create(args),
      },
});

/** What the dispatcher surfaces support besides the five core cases. */
export const dispatcherSupports = (shapes: readonly Shape[]) => ({
  shapes,
  providerOptions: true,
  wrapTwice: true,
  methods: ['sayRepeatingCall', 'sayAnsweredByTool'] as const,
});

/** Chat Completions + createToolDispatcher; the app keeps the messages. */
export const chatDriver = (stream: boolean) =>
  driver((app, conversationId, { wrapTwice }) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app, wrapTwice));
    let history: ChatCompletionMessageParam[] = [];
    let before: ChatCompletionMessageParam[] = [];
    return async (turn) => {
      if (!turn.resend) before = history;
      let sent = [...before, userMessage(turn, 'text', 'field')];
      for (;;) {
        if (turn.cacheEachStep) sent = cacheLast(sent, 'text', 'field');
        const messages = [{ role: 'system' as const, content: turn.system }, ...sent];
        const params = { model: 'm', messages, tools: tools.describe(chatTools) };
        const completion = stream
          ? await app.openai.chat.completions.stream(params).finalChatCompletion()
          : await app.openai.chat.completions.create(params);
        const message = completion.choices[0]?.message;
        if (message === undefined) throw new Error('no choice');
        sent.push(message);
        if (!message.tool_calls?.length) break;
        sent.push(...(await tools.runChat(message, { messages, conversationId })));
        if (turn.mode === 'tool') break; // the app answers with the tool's result
      }
      history = sent;
    };
  });

/** Responses + createToolDispatcher; the app sends the whole input. */
export const responsesInputDriver = (stream: boolean) =>
  driver((app, conversationId, { wrapTwice }) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app, wrapTwice));
    let history: ResponseInput = [];
    let before: ResponseInput = [];
    return async (turn) => {
      if (!turn.resend) before = history;
      let input: ResponseInput = [...before, userMessage(turn, 'input_text', 'field')];
      for (;;) {
        if (turn.cacheEachStep) input = cacheLast(input, 'input_text', 'field');
        const sent = [{ role: 'developer' as const, content: turn.system }, ...input];
        const params = { model: 'm', input: sent, tools: tools.describe(responsesTools) };
        const response = stream
          ? await app.openai.responses.stream(params).finalResponse()
          : await app.openai.responses.create(params);
        input.push(...(response.output as ResponseInputItem[]));
        if (!response.output.some((o) => o.type === 'function_call')) break;
        input.push(...(await tools.runResponses(response, { input: sent, conversationId })));
        if (turn.mode === 'tool') break;
      }
      history = input;
    };
  });

/**
 * Responses + createToolDispatcher chained with `previous_response_id`: OpenAI keeps the
 * conversation; each request carries only the new message, or only the tool outputs. A turn the
 * app answered with the tool's result leaves outputs the next request carries before the user's
 * message.
 */
export const responsesChainDriver = (stream: boolean) =>
  driver((app, conversationId, { wrapTwice }) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app, wrapTwice));
    let last: { id?: string; pending: ResponseInput } = { pending: [] };
    let before = last;
    return async (turn) => {
      if (!turn.resend) before = last;
      const user: ResponseInputItem = userMessage(turn, 'input_text', 'field');
      const plain = turn.shape === 'string' && !turn.cache && before.pending.length === 0;
      let request = {
        input: plain ? turn.text : ([...before.pending, user] as string | ResponseInput),
        ...(before.id === undefined ? {} : { previous_response_id: before.id }),
      };
      for (;;) {
        if (turn.cacheEachStep && typeof request.input !== 'string') {
          request = { ...request, input: cacheLast(request.input, 'input_text', 'field') };
        }
        const params = {
          model: 'm',
          instructions: turn.system,
          tools: tools.describe(responsesTools),
          ...request,
        };
        const response = stream
          ? await app.openai.responses.stream(params).finalResponse()
          : await app.openai.responses.create(params);
        if (!response.output.some((o) => o.type === 'function_call')) {
          last = { id: response.id, pending: [] };
          return;
        }
        const outputs = await tools.runResponses(response, { ...request, conversationId });
        if (turn.mode === 'tool') {
          last = { id: response.id, pending: outputs };
          return;
        }
        request = { input: outputs, previous_response_id: response.id };
      }
    };
  });
