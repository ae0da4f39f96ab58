/** A small agent app over the real openai client, shared by the tests and the child processes. */
import { appendFileSync } from 'node:fs';
import {
  type ModelTurn,
  openaiClientOptions,
  type ScriptedReply,
} from '@idempotent-tools/testing/openai';
import { Agent, OpenAIResponsesModel, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { wrapAgentTools } from '../agents.js';
import type { Idempotency } from '../index.js';

export { ticketSystem, withRetries } from '@idempotent-tools/testing';
export { CRASH_PROMPT, ticketModel } from '@idempotent-tools/testing/openai';

export const ticketArgs = z.object({
  title: z.string().min(1),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});

export function client(baseURL: string): OpenAI {
  return new OpenAI(openaiClientOptions(baseURL));
}

/** The approval scenario: `refund` waits for a human (needsApproval); the effect is counted in a file. */
export function refundAgent(
  idempotency: Idempotency,
  baseURL: string,
  effectsFile: string,
  /** Also give the agent `lookup_order` (no approval), its effect counted in this file. */
  lookupsFile?: string,
) {
  const lookup = tool({
    name: 'lookup_order',
    description: 'Look an order up.',
    parameters: z.object({ order_id: z.string() }),
    execute: ({ order_id }) => {
      appendFileSync(lookupsFile as string, `${JSON.stringify({ order_id })}\n`);
      return { order_id, total: 1999 };
    },
  });
  const refund = tool({
    name: 'refund',
    description: 'Refund an order.',
    parameters: z.object({ order: z.string() }),
    needsApproval: true,
    execute: ({ order }) => {
      appendFileSync(effectsFile, `${JSON.stringify({ order })}\n`);
      return { refunded: order };
    },
  });
  const openai = new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 });
  return wrapAgentTools(
    idempotency,
    new Agent({
      name: 'billing',
      instructions: 'You refund orders.',
      tools: lookupsFile === undefined ? [refund] : [lookup, refund],
      model: new OpenAIResponsesModel(openai, 'scripted'),
    }),
  );
}

/** Refunds the order the user names, then answers with the tool output. */
export function refundModel(turn: ModelTurn): ScriptedReply {
  const order = /order (\d+)/.exec(turn.userText)?.[1];
  if (order === undefined) return { content: 'How can I help?' };
  if (turn.toolOutputs.length === 0)
    return { toolCalls: [{ name: 'refund', arguments: { order } }] };
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}

/** Looks the order up and refunds it in one response, then answers with the tool outputs. */
export function refundLookupModel(turn: ModelTurn): ScriptedReply {
  const order = /order (\d+)/.exec(turn.userText)?.[1];
  if (order === undefined) return { content: 'How can I help?' };
  if (turn.toolOutputs.length === 0) {
    return {
      toolCalls: [
        { name: 'lookup_order', arguments: { order_id: order } },
        { name: 'refund', arguments: { order } },
      ],
    };
  }
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}

/** The approval cases' tool: `charge` waits for a human (needsApproval); each charge a line in a file. */
export function chargeAgent(idempotency: Idempotency, baseURL: string, effectsFile: string) {
  const charge = tool({
    name: 'charge',
    description: 'Charge the customer.',
    parameters: z.object({ amount: z.number() }),
    needsApproval: true,
    execute: ({ amount }) => {
      appendFileSync(effectsFile, `${JSON.stringify({ amount })}\n`);
      return { charged: amount };
    },
  });
  const openai = new OpenAI({ apiKey: 'test', baseURL, maxRetries: 0 });
  return wrapAgentTools(
    idempotency,
    new Agent({
      name: 'billing',
      instructions: 'You charge customers.',
      tools: [charge],
      model: new OpenAIResponsesModel(openai, 'scripted'),
    }),
  );
}

/** Charges the amount the user names ("Charge 5"), then answers with the tool output. */
export function chargeModel(turn: ModelTurn): ScriptedReply {
  const amount = /Charge (\d+)/.exec(turn.userText)?.[1];
  if (amount === undefined) return { content: 'How can I help?' };
  if (turn.toolOutputs.length === 0) {
    return { toolCalls: [{ name: 'charge', arguments: { amount: Number(amount) } }] };
  }
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}
