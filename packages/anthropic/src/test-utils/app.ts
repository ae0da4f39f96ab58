/** A small ticket-opening app over the real Anthropic SDK client, shared by the tests and the crash child. */
import Anthropic from '@anthropic-ai/sdk';
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import type { TicketSystem } from '@idempotent-tools/testing';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/anthropic';
import { z } from 'zod';
import {
  type IdempotentToolRunnerOptions,
  idempotentToolRunner,
  type ToolDispatcher,
  type TurnOptions,
} from '../index.js';

export { type TicketSystem, ticketSystem } from '@idempotent-tools/testing';

export const ticketArgs = z.object({
  title: z.string().min(1),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});

export const ticketDefinition: Tool = {
  name: 'create_ticket',
  description: 'Open a support ticket.',
  input_schema: z.toJSONSchema(ticketArgs) as Tool.InputSchema,
};

/** The SDK's own runnable tool (betaZodTool), as an app writes it. */
export const ticketTool = (system: TicketSystem, after?: () => void) =>
  betaZodTool({
    name: 'create_ticket',
    description: 'Open a support ticket.',
    inputSchema: ticketArgs,
    run: (args) => {
      const out = JSON.stringify(system.create(args));
      after?.();
      return out;
    },
  });

/** Calls create_ticket once for the user's text, then answers with the tool results. */
export function ticketModel(turn: ModelTurn): ScriptedReply {
  if (turn.toolResults.length === 0) {
    return { toolUses: [{ name: 'create_ticket', input: { title: turn.userText } }] };
  }
  return { text: `Done: ${turn.toolResults.join(' | ')}` };
}

export const client = (baseURL: string, maxRetries = 0) =>
  new Anthropic({ apiKey: 'test', baseURL, maxRetries });

export interface TurnResult {
  /** The conversation after the turn, its answer last. */
  messages: MessageParam[];
  /** Every tool_result block sent during the turn, in order. */
  results: Array<{ content: unknown; is_error?: boolean }>;
}

const resultsOf = (messages: readonly { role: string; content: unknown }[]) =>
  messages.flatMap((m) =>
    m.role === 'user' && Array.isArray(m.content)
      ? (m.content as Array<{ type: string; content: unknown; is_error?: boolean }>).filter(
          (b) => b.type === 'tool_result',
        )
      : [],
  );

const ephemeral = { type: 'ephemeral' } as const;

/**
 * What the user says, in one of the shapes the API takes: `'string'` (the content is the text) or
 * `'blocks'` (`[{ type: 'text', text }]`); `cache`: with a cache breakpoint on its (last) text
 * block, as apps that cache the conversation mark it (a block, whatever the shape).
 */
export function userMessage(text: string, shape = 'string', cache = false): MessageParam {
  if (shape === 'string' && !cache) return { role: 'user', content: text };
  return {
    role: 'user',
    content: [{ type: 'text', text, ...(cache && { cache_control: ephemeral }) }],
  };
}

/**
 * The documented incremental caching: before each request the breakpoint moves onto the last
 * block of the last message (the user's message, then the tool results), off every other one.
 */
export function withBreakpointOnLast(messages: readonly MessageParam[]): MessageParam[] {
  return messages.map((message, i): MessageParam => {
    const last = i === messages.length - 1;
    if (typeof message.content === 'string') {
      return last ? userMessage(message.content, 'blocks', true) : message;
    }
    const blocks = message.content.map((block) => {
      const { cache_control: _, ...rest } = block as typeof block & { cache_control?: unknown };
      return rest;
    });
    const end = blocks.length - 1;
    const content = blocks.map((b, j) =>
      last && j === end ? { ...b, cache_control: ephemeral } : b,
    );
    return { ...message, content } as MessageParam;
  });
}

/** How a turn is run, beyond its identity. */
export interface LoopOptions {
  stream?: boolean;
  system?: string;
  /** Move the cache breakpoint onto the last message before every request. */
  cacheEachStep?: boolean;
}

/** One user turn of a hand-written loop: model, tools, model, ... until an answer. */
export async function dispatchTurn(
  anthropic: Anthropic,
  tools: ToolDispatcher,
  history: readonly MessageParam[],
  options: TurnOptions &
    LoopOptions & {
      /** The app's loop stops once the tool results are appended (no text from the model). */
      stopAfterTools?: boolean;
    } = {},
): Promise<TurnResult> {
  const { stream, system = 'You open tickets.', cacheEachStep, stopAfterTools, ...turn } = options;
  let messages = [...history];
  const start = messages.length;
  for (let step = 0; step < 6; step++) {
    if (cacheEachStep) messages = withBreakpointOnLast(messages);
    const params = {
      model: 'scripted',
      max_tokens: 1024,
      system,
      messages: [...messages],
      tools: tools.describe([ticketDefinition]),
    };
    const reply = stream
      ? await anthropic.messages.stream(params).finalMessage()
      : await anthropic.messages.create(params);
    messages.push({ role: 'assistant', content: reply.content });
    if (reply.stop_reason !== 'tool_use') {
      return { messages, results: resultsOf(messages.slice(start)) };
    }
    messages.push(await tools.run(reply, { messages, ...turn }));
    if (stopAfterTools) return { messages, results: resultsOf(messages.slice(start)) };
  }
  throw new Error('too many steps');
}

/** One user turn through the SDK's tool runner (threaded, as it runs by default). */
export async function runnerTurn(
  anthropic: Anthropic,
  tools: Parameters<typeof idempotentToolRunner>[1]['tools'],
  history: readonly MessageParam[],
  options: IdempotentToolRunnerOptions,
  settings: LoopOptions & { runToolsEagerly?: boolean; max_iterations?: number } = {},
): Promise<TurnResult> {
  const { system = 'You open tickets.', cacheEachStep, ...rest } = settings;
  const start = history.length;
  const messages = cacheEachStep ? withBreakpointOnLast(history) : [...history];
  const runner = idempotentToolRunner(
    anthropic,
    { model: 'scripted', max_tokens: 1024, system, messages, tools, ...rest },
    options,
  );
  if (!cacheEachStep) {
    await runner;
    const after = runner.params.messages as MessageParam[];
    return { messages: after, results: resultsOf(after.slice(start)) };
  }
  // The app runs each step itself to move the breakpoint: it appends the reply and the results.
  for await (const item of runner) {
    const message = 'finalMessage' in item ? await item.finalMessage() : item;
    const reply: MessageParam = { role: 'assistant', content: message.content as never };
    if (message.stop_reason !== 'tool_use') {
      const after = [...(runner.params.messages as MessageParam[]), reply];
      return { messages: after, results: resultsOf(after.slice(start)) };
    }
    const results = await runner.generateToolResponse();
    runner.setMessagesParams((params) => ({
      ...params,
      messages: withBreakpointOnLast([
        ...(params.messages as MessageParam[]),
        reply,
        ...(results === null ? [] : [results as MessageParam]),
      ]),
    }));
  }
  throw new Error('the runner ended without an answer');
}

/** The user message of the crash scenarios. */
export const CRASH_PROMPT = 'The printer is on fire';
