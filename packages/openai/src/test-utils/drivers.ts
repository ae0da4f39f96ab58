/**
 * Apps for the turn identity cases (`runTurnIdentityCases` of @idempotent-tools/testing): each
 * runs conversations through one surface of the adapter, with the real `openai` client against
 * the scripted server, JSON or streamed. The ticket app and the turn bookkeeping are
 * `openaiTurnDriver` of @idempotent-tools/testing/openai.
 */
import {
  cacheLast,
  isDeveloperError,
  openaiTurnDriver,
  type TurnShape as Shape,
  type TicketTurnApp,
  userMessage,
} from '@idempotent-tools/testing/openai';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ResponseInput, ResponseInputItem } from 'openai/resources/responses/responses';
import type { z } from 'zod';
import { createToolDispatcher } from '../index.js';
import { chatTools, responsesTools, ticketArgs } from './app.js';

export { isDeveloperError };

type App = TicketTurnApp<OpenAI>;

/** The apps' client: no retries of its own (the cases retry the turn). */
const driver = (conversation: Parameters<typeof openaiTurnDriver<OpenAI>>[1]) =>
  openaiTurnDriver(
    (baseURL) => new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 }),
    conversation,
  );
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
