/** A small ticket-opening app over the real Anthropic SDK client, shared by the tests and the crash child. */
import { appendFileSync } from 'node:fs';
import Anthropic from '@anthropic-ai/sdk';
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import { z } from 'zod';
import {
  type IdempotentToolRunnerOptions,
  idempotentToolRunner,
  type ToolDispatcher,
  type TurnOptions,
} from '../index.js';
import type { ModelTurn, ScriptedReply } from '../testing/index.js';

export const ticketArgs = z.object({
  title: z.string().min(1),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});

export const ticketDefinition: Tool = {
  name: 'create_ticket',
  description: 'Open a support ticket.',
  input_schema: z.toJSONSchema(ticketArgs) as Tool.InputSchema,
};

/** The "vendor": every ticket opened, in memory, and in a file when one is given. */
export function ticketSystem(effectsFile?: string) {
  const tickets: Array<{ id: string; title: string }> = [];
  return {
    tickets,
    create(args: z.infer<typeof ticketArgs>) {
      const ticket = { id: `T-${tickets.length + 1}`, title: args.title };
      tickets.push(ticket);
      if (effectsFile !== undefined) appendFileSync(effectsFile, `${JSON.stringify(ticket)}\n`);
      return { ticket: ticket.id, title: ticket.title, priority: args.priority };
    },
  };
}

export type TicketSystem = ReturnType<typeof ticketSystem>;

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

/** One user turn of a hand-written loop: model, tools, model, ... until an answer. */
export async function dispatchTurn(
  anthropic: Anthropic,
  tools: ToolDispatcher,
  history: readonly MessageParam[],
  options: TurnOptions & { stream?: boolean; system?: string } = {},
): Promise<TurnResult> {
  const { stream, system = 'You open tickets.', ...turn } = options;
  const messages = [...history];
  const start = messages.length;
  for (let step = 0; step < 6; step++) {
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
  }
  throw new Error('too many steps');
}

/** One user turn through the SDK's tool runner (threaded, as it runs by default). */
export async function runnerTurn(
  anthropic: Anthropic,
  tools: Parameters<typeof idempotentToolRunner>[1]['tools'],
  history: readonly MessageParam[],
  options: IdempotentToolRunnerOptions,
  settings: { stream?: boolean; system?: string; runToolsEagerly?: boolean } = {},
): Promise<TurnResult> {
  const { system = 'You open tickets.', ...rest } = settings;
  const start = history.length;
  const runner = idempotentToolRunner(
    anthropic,
    { model: 'scripted', max_tokens: 1024, system, messages: [...history], tools, ...rest },
    options,
  );
  await runner;
  const messages = runner.params.messages as MessageParam[];
  return { messages, results: resultsOf(messages.slice(start)) };
}

/** The user message of the crash scenarios. */
export const CRASH_PROMPT = 'The printer is on fire';
