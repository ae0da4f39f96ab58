/**
 * The approval scenario of approval.test.ts, shared with the child process that resumes it: a
 * billing agent whose `refund` needs a person's approval (`needsApproval`) and whose
 * `lookup_order` does not; the model calls both at once. The effects are counted in files.
 */
import { appendFileSync } from 'node:fs';
import { createOpenAI } from '@ai-sdk/openai';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/openai';
import { generateText, isStepCount, type ModelMessage, streamText, type ToolSet, tool } from 'ai';
import { z } from 'zod';
import { idempotentTools } from '../index.js';

/** Looks the order up and refunds it (in parallel), then answers with the tool outputs. */
export function refundModel(turn: ModelTurn): ScriptedReply {
  const order = /order (\d+)/.exec(turn.userText)?.[1];
  if (order === undefined) return { content: 'How can I help?' };
  if (turn.toolOutputs.length === 0) {
    return {
      toolCalls: [
        { name: 'lookup_order', arguments: { order } },
        { name: 'refund', arguments: { order } },
      ],
    };
  }
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}

export interface Files {
  db: string;
  refunds: string;
  lookups: string;
}

export function billingTools(store: ReturnType<typeof openSqliteStore>, files: Files): ToolSet {
  return idempotentTools(
    {
      refund: tool({
        description: 'Refund an order.',
        inputSchema: z.object({ order: z.string() }),
        needsApproval: true,
        execute: async ({ order }) => {
          appendFileSync(files.refunds, `${JSON.stringify({ order, pid: process.pid })}\n`);
          return { refunded: order };
        },
      }),
      lookup_order: tool({
        description: 'Look an order up (it is counted, to see whether it runs again).',
        inputSchema: z.object({ order: z.string() }),
        execute: async ({ order }) => {
          appendFileSync(files.lookups, `${JSON.stringify({ order, pid: process.pid })}\n`);
          return { order, total: 1999 };
        },
      }),
    },
    { store, conversationId: 'chat-billing-7' },
  );
}

/** One request of the app (a route handler): the messages in, what the SDK produced out. */
export async function billingRequest(options: {
  baseURL: string;
  files: Files;
  messages: ModelMessage[];
  mode?: 'generateText' | 'streamText' | undefined;
}) {
  const store = openSqliteStore(options.files.db);
  try {
    const openai = createOpenAI({ baseURL: options.baseURL, apiKey: 'test' });
    const settings = {
      model: openai.chat('gpt-4o-mini'),
      tools: billingTools(store, options.files),
      messages: options.messages,
      stopWhen: isStepCount(5),
    };
    const result =
      options.mode === 'streamText'
        ? await (async () => {
            const streamed = streamText(settings);
            await streamed.consumeStream();
            return {
              steps: await streamed.steps,
              response: await streamed.response,
              text: await streamed.text,
            };
          })()
        : await generateText(settings);
    const parts = result.steps.flatMap((step) => step.content);
    return {
      text: result.text,
      responseMessages: result.response.messages as ModelMessage[],
      approvalRequests: parts.flatMap((p) =>
        p.type === 'tool-approval-request'
          ? [
              {
                approvalId: p.approvalId,
                toolCallId: p.toolCall.toolCallId,
                toolName: p.toolCall.toolName,
              },
            ]
          : [],
      ),
      // What the model was told the tools returned (the scripted model echoes it): the outputs
      // of approved calls included, which the SDK runs before the first step (in no step).
      outputs: result.text.startsWith('Done: ')
        ? result.text
            .slice('Done: '.length)
            .split(' | ')
            .map((text) => {
              try {
                return JSON.parse(text) as unknown;
              } catch {
                return text;
              }
            })
        : [],
    };
  } finally {
    store.close();
  }
}

/**
 * The messages the client sends back after the user decided: the history, and the approval
 * responses in the last tool message (as useChat's `addToolApprovalResponse` makes them).
 */
export function withApprovalResponses(
  history: ModelMessage[],
  responses: Array<{ approvalId: string; approved: boolean; reason?: string }>,
): ModelMessage[] {
  const parts = responses.map((r) => ({ type: 'tool-approval-response' as const, ...r }));
  const messages = structuredClone(history);
  const last = messages.at(-1);
  if (last?.role === 'tool') last.content.push(...parts);
  else messages.push({ role: 'tool', content: parts });
  return messages;
}
