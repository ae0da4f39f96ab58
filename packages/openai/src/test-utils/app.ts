/** A small tool-calling app over the real openai client, shared by the tests and the crash child. */
import { openaiClientOptions } from '@idempotent-tools/testing/openai';
import OpenAI from 'openai';
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import type { FunctionTool, ResponseInput } from 'openai/resources/responses/responses';
import { z } from 'zod';
import type { ToolDispatcher, TurnOptions } from '../index.js';

export { ticketSystem, withRetries } from '@idempotent-tools/testing';
export { CRASH_PROMPT, ticketModel } from '@idempotent-tools/testing/openai';

export const ticketArgs = z.object({
  title: z.string().min(1),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});

export const chatTools: ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'create_ticket',
      description: 'Open a support ticket.',
      parameters: z.toJSONSchema(ticketArgs) as Record<string, unknown>,
    },
  },
];

export const responsesTools: FunctionTool[] = [
  {
    type: 'function',
    name: 'create_ticket',
    description: 'Open a support ticket.',
    parameters: z.toJSONSchema(ticketArgs) as Record<string, unknown>,
    strict: false,
  },
];

export function client(baseURL: string): OpenAI {
  return new OpenAI(openaiClientOptions(baseURL));
}

/** One user turn with Chat Completions: model, tools, model, ... until a text answer. */
export async function chatTurn(
  openai: OpenAI,
  tools: ToolDispatcher,
  history: ChatCompletionMessageParam[],
  options: TurnOptions = { conversationId: 'chat-1' },
): Promise<{ messages: ChatCompletionMessageParam[]; text: string }> {
  const messages = [...history];
  for (let step = 0; step < 6; step++) {
    const completion = await openai.chat.completions.create({
      model: 'scripted',
      messages,
      tools: tools.describe(chatTools),
    });
    const message = completion.choices[0]?.message;
    if (message === undefined) throw new Error('no choice');
    messages.push(message);
    if (!message.tool_calls?.length) return { messages, text: message.content ?? '' };
    messages.push(...(await tools.runChat(message, { messages, ...options })));
  }
  throw new Error('too many steps');
}

/** One user turn with the Responses API, the app keeping the input itself (no previous_response_id). */
export async function responsesTurn(
  openai: OpenAI,
  tools: ToolDispatcher,
  history: ResponseInput,
  options: TurnOptions = { conversationId: 'chat-1' },
): Promise<{ input: ResponseInput; text: string }> {
  const input = [...history];
  for (let step = 0; step < 6; step++) {
    const response = await openai.responses.create({
      model: 'scripted',
      input,
      tools: tools.describe(responsesTools),
    });
    const calls = response.output.filter((item) => item.type === 'function_call');
    if (calls.length === 0) return { input, text: response.output_text };
    input.push(...calls, ...(await tools.runResponses(response, { input, ...options })));
  }
  throw new Error('too many steps');
}
