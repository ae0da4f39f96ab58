/**
 * A Cloudflare Worker: an AI SDK agent (the real `generateText` tool loop) behind `POST /chat`,
 * whose tools are wrapped per request by `idempotentTools` on the Durable Objects store. Each
 * request carries the chat id and the conversation's messages, as `useChat` sends them.
 *
 * The ticket desk (`TicketDesk`, a Durable Object of its own) is the side effect with no
 * idempotency of its own: every `open` is a new ticket. `GET /tickets` lists them.
 *
 * Offline: a scripted model (the AI SDK's own MockLanguageModelV4) opens one ticket per user
 * message, then answers. Deploy it with wrangler and `wrangler.jsonc`; put your provider's model
 * where `scriptedModel` is.
 */

import { DurableObject } from 'cloudflare:workers';
import { idempotentTools } from '@idempotent-tools/ai-sdk';
import { createDurableObjectStore, IdempotencyObject } from '@idempotent-tools/store-cloudflare';
import { generateText, isStepCount, type LanguageModel, type ModelMessage, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';

export { IdempotencyObject };

interface Env {
  IDEMPOTENCY: DurableObjectNamespace<IdempotencyObject>;
  TICKETS: DurableObjectNamespace<TicketDesk>;
}

/** The help desk's tickets: a vendor API with no idempotency key (each call opens one). */
export class TicketDesk extends DurableObject {
  async open(title: string, chatId: string): Promise<{ ticketId: string }> {
    const tickets = (await this.ctx.storage.get<number>('count')) ?? 0;
    const ticketId = `T-${String(tickets + 1).padStart(4, '0')}`;
    await this.ctx.storage.put('count', tickets + 1);
    await this.ctx.storage.put(`ticket:${ticketId}`, { ticketId, title, chatId });
    return { ticketId };
  }
  async list(): Promise<Array<{ ticketId: string; title: string; chatId: string }>> {
    const entries = await this.ctx.storage.list<{
      ticketId: string;
      title: string;
      chatId: string;
    }>({ prefix: 'ticket:' });
    return [...entries.values()];
  }
}

/** A scripted model: opens a ticket titled with the user's words, then says which one. */
function scriptedModel(): LanguageModel {
  let callId = 0;
  const usage = {
    inputTokens: { total: 0, noCache: 0, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 0, text: 0, reasoning: undefined },
  };
  return new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last?.role === 'tool') {
        const part = last.content[0];
        const output = part?.type === 'tool-result' ? JSON.stringify(part.output) : '';
        return {
          content: [{ type: 'text', text: `Done: ${output}` }],
          finishReason: { unified: 'stop', raw: undefined },
          usage,
          warnings: [],
        };
      }
      const words =
        last?.role === 'user' ? last.content.map((p) => ('text' in p ? p.text : '')) : [];
      return {
        // A new tool-call id on every call, as a real provider does on a retry.
        content: [
          {
            type: 'tool-call',
            toolCallId: `call_${++callId}_${crypto.randomUUID()}`,
            toolName: 'open_ticket',
            input: JSON.stringify({ title: words.join(' ') }),
          },
        ],
        finishReason: { unified: 'tool-calls', raw: undefined },
        usage,
        warnings: [],
      };
    },
  });
}

async function chat(request: Request, env: Env): Promise<Response> {
  const { id, messages } = (await request.json()) as { id: string; messages: ModelMessage[] };
  const desk = env.TICKETS.get(env.TICKETS.idFromName('desk'));
  const tools = idempotentTools(
    {
      open_ticket: tool({
        description: 'Open a help desk ticket for the user.',
        inputSchema: z.object({ title: z.string() }),
        execute: async ({ title }) => desk.open(title, id),
      }),
    },
    { store: createDurableObjectStore(env.IDEMPOTENCY), conversationId: id },
  );
  const result = await generateText({
    model: scriptedModel(),
    tools,
    messages,
    stopWhen: isStepCount(3),
  });
  const calls = result.steps.flatMap((step) => step.toolResults);
  return Response.json({
    text: result.text,
    tools: calls.map((call) => ({ tool: call.toolName, output: call.output })),
  });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (request.method === 'POST' && pathname === '/chat') return chat(request, env);
    if (request.method === 'GET' && pathname === '/tickets') {
      return Response.json(await env.TICKETS.get(env.TICKETS.idFromName('desk')).list());
    }
    return new Response('POST /chat { id, messages } or GET /tickets', { status: 404 });
  },
} satisfies ExportedHandler<Env>;
