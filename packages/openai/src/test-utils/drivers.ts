/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter, with the real `openai` client (or the
 * Agents SDK's OpenAI models on it) against the scripted server, JSON or streamed.
 */
import type { TurnIdentityConversation, TurnIdentityDriver } from '@idempotent-tools/testing';
import {
  Agent,
  type AgentInputItem,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ResponseInput, ResponseInputItem } from 'openai/resources/responses/responses';
import type { z } from 'zod';
import { wrapAgentTools } from '../agents.js';
import {
  ConfigurationError,
  createIdempotency,
  createMemoryStore,
  createToolDispatcher,
  type Idempotency,
} from '../index.js';
import { type ModelTurn, type ScriptedServer, startScriptedServer } from '../testing/index.js';
import { chatTools, responsesTools, ticketArgs, ticketSystem } from './app.js';

/** Opens a ticket titled with the user's words once per turn, then answers. */
function model(turn: ModelTurn) {
  if (turn.toolOutputs.length === 0) {
    return { toolCalls: [{ name: 'create_ticket', arguments: { title: turn.userText } }] };
  }
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}

/** The developer's error as the framework surfaces it (the Agents SDK wraps it in a ToolCallError). */
export const isDeveloperError = (error: unknown) =>
  ConfigurationError.isInstance(error) ||
  ConfigurationError.isInstance((error as { error?: unknown } | undefined)?.error);

type Say = (text: string, system: string, resend: boolean, loseReply: boolean) => Promise<void>;

interface App {
  server: ScriptedServer;
  openai: OpenAI;
  idempotency: Idempotency;
  system: ReturnType<typeof ticketSystem>;
  /** Cut the reply of the request after the next effect (a broken stream, a cut body). */
  loseNextReply(): void;
}

/** A driver whose conversations are made by `conversation(app, id)`. */
function driver(conversation: (app: App, id: string | undefined) => Say) {
  return async (): Promise<TurnIdentityDriver> => {
    const server = await startScriptedServer({ respond: model });
    const openai = new OpenAI({ apiKey: 'test', baseURL: server.baseURL, maxRetries: 0 });
    const armed = { lose: false };
    const system = ticketSystem();
    const app: App = {
      server,
      openai,
      idempotency: createIdempotency({ store: createMemoryStore() }),
      system: {
        ...system,
        create(args) {
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
    };
    return {
      conversation(id): TurnIdentityConversation {
        const say = conversation(app, id);
        let last = { text: '', system: '' };
        const turn = async (text: string, system: string, resend: boolean, lose: boolean) => {
          last = { text, system };
          if (lose) app.loseNextReply();
          for (let attempt = 0; ; attempt++) {
            try {
              return await say(text, system, resend || attempt > 0, lose);
            } catch (error) {
              if (isDeveloperError(error) || attempt >= 2) throw error;
            }
          }
        };
        return {
          say: (text, options) => turn(text, options?.system ?? 'You open tickets.', false, false),
          resend: (options) => turn(last.text, options?.system ?? last.system, true, false),
          sayLosingReply: (text, options) =>
            turn(text, options?.system ?? 'You open tickets.', false, true),
        };
      },
      effects: () => system.tickets.length,
      close: () => server.close(),
    };
  };
}

const handlers = (app: App) => ({
  create_ticket: {
    schema: ticketArgs,
    execute: (args: z.infer<typeof ticketArgs>) => app.system.create(args),
  },
});

/** Chat Completions + createToolDispatcher; the app keeps the messages. */
export const chatDriver = (stream: boolean) =>
  driver((app, conversationId) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app));
    let history: ChatCompletionMessageParam[] = [];
    let before: ChatCompletionMessageParam[] = [];
    return async (text, system, resend) => {
      if (!resend) before = history;
      const sent: ChatCompletionMessageParam[] = [...before, { role: 'user', content: text }];
      for (;;) {
        const messages = [{ role: 'system' as const, content: system }, ...sent];
        const params = { model: 'm', messages, tools: tools.describe(chatTools) };
        const completion = stream
          ? await app.openai.chat.completions.stream(params).finalChatCompletion()
          : await app.openai.chat.completions.create(params);
        const message = completion.choices[0]?.message;
        if (message === undefined) throw new Error('no choice');
        sent.push(message);
        if (!message.tool_calls?.length) break;
        sent.push(...(await tools.runChat(message, { messages, conversationId })));
      }
      history = sent;
    };
  });

/** Responses + createToolDispatcher; the app sends the whole input. */
export const responsesInputDriver = (stream: boolean) =>
  driver((app, conversationId) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app));
    let history: ResponseInput = [];
    let before: ResponseInput = [];
    return async (text, system, resend) => {
      if (!resend) before = history;
      const input: ResponseInput = [...before, { role: 'user', content: text }];
      for (;;) {
        const sent = [{ role: 'developer' as const, content: system }, ...input];
        const params = { model: 'm', input: sent, tools: tools.describe(responsesTools) };
        const response = stream
          ? await app.openai.responses.stream(params).finalResponse()
          : await app.openai.responses.create(params);
        input.push(...(response.output as ResponseInputItem[]));
        if (!response.output.some((o) => o.type === 'function_call')) break;
        input.push(...(await tools.runResponses(response, { input: sent, conversationId })));
      }
      history = input;
    };
  });

/**
 * Responses + createToolDispatcher chained with `previous_response_id`: OpenAI keeps the
 * conversation; each request carries only the new message, or only the tool outputs.
 */
export const responsesChainDriver = (stream: boolean) =>
  driver((app, conversationId) => {
    const tools = createToolDispatcher(app.idempotency, handlers(app));
    let last: string | undefined;
    let before: string | undefined;
    return async (text, system, resend) => {
      if (!resend) before = last;
      let request = {
        input: text as string | ResponseInput,
        ...(before === undefined ? {} : { previous_response_id: before }),
      };
      for (;;) {
        const params = {
          model: 'm',
          instructions: system,
          tools: tools.describe(responsesTools),
          ...request,
        };
        const response = stream
          ? await app.openai.responses.stream(params).finalResponse()
          : await app.openai.responses.create(params);
        if (!response.output.some((o) => o.type === 'function_call')) {
          last = response.id;
          return;
        }
        const outputs = await tools.runResponses(response, { ...request, conversationId });
        request = { input: outputs, previous_response_id: response.id };
      }
    };
  });

/** The Agents SDK: `run(agent, ...)` with the conversation id in the app's context. */
export const agentsDriver = (options: {
  model: 'responses' | 'chat';
  stream: boolean;
  history: 'input' | 'previousResponseId';
}) =>
  driver((app, conversationId) => {
    const ticket = tool({
      name: 'create_ticket',
      description: 'Open a support ticket.',
      parameters: ticketArgs,
      execute: (args) => app.system.create(args),
    });
    const model =
      options.model === 'responses'
        ? new OpenAIResponsesModel(app.openai, 'm')
        : new OpenAIChatCompletionsModel(app.openai, 'm');
    let history: AgentInputItem[] = [];
    let before: AgentInputItem[] = [];
    let last: string | undefined;
    let lastBefore: string | undefined;
    const context = conversationId === undefined ? {} : { conversationId };
    return async (text, instructions, resend) => {
      // The app builds its agent per request, with the instructions of the moment.
      const agent = wrapAgentTools(
        app.idempotency,
        new Agent({ name: 'support', instructions, tools: [ticket], model }),
      );
      if (!resend) [before, lastBefore] = [history, last];
      const chained = options.history === 'previousResponseId';
      const input: AgentInputItem[] = chained ? [] : [...before];
      input.push({ role: 'user', content: text });
      const runOptions = {
        context,
        ...(chained && lastBefore !== undefined ? { previousResponseId: lastBefore } : {}),
      };
      const result = options.stream
        ? await run(agent, input, { ...runOptions, stream: true })
        : await run(agent, input, runOptions);
      if (options.stream) await (result as { completed: Promise<void> }).completed;
      history = result.history;
      last = result.lastResponseId;
    };
  });
