import type { IdempotencyStore } from '@idempotent-tools/core';
import { type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { FakeBuiltModel } from '@langchain/core/testing';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import type { BaseCheckpointSaver } from '@langchain/langgraph';
import { type AgentMiddleware, createAgent } from 'langchain';
import { z } from 'zod';
import { idempotentToolsMiddleware } from '../middleware.js';
import { idempotentTools } from '../tools.js';
import type { IdempotentToolsMiddlewareOptions } from '../types.js';

/** The two ways in: the createAgent middleware, or tools wrapped one by one. */
export type Mode = 'middleware' | 'wrapped';
export const MODES: Mode[] = ['middleware', 'wrapped'];

/** A ticket tool whose side effect is a push to `effects`; `onStart` hears when it starts. */
export function ticketTool(effects: string[], delayMs = 0, onStart?: () => void) {
  return tool(
    async ({ title }) => {
      onStart?.();
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      effects.push(title);
      return { ticketId: `T-${effects.length}`, title };
    },
    {
      name: 'create_ticket',
      description: 'Open a support ticket.',
      schema: z.object({ title: z.string() }),
    },
  );
}

/** A createAgent made idempotent the `mode` way. */
export function agentWith(input: {
  mode: Mode;
  model: FakeBuiltModel;
  tools: StructuredToolInterface[];
  options: IdempotentToolsMiddlewareOptions;
  /** Middleware listed before (outside) the idempotency middleware. */
  before?: AgentMiddleware[];
  /** Middleware listed after (inside) it. */
  after?: AgentMiddleware[];
  checkpointer?: BaseCheckpointSaver;
}) {
  const { mode, model, options } = input;
  const own = mode === 'middleware' ? [idempotentToolsMiddleware(options)] : [];
  return createAgent({
    model,
    tools: mode === 'middleware' ? input.tools : idempotentTools(input.tools, options as never),
    middleware: [...(input.before ?? []), ...own, ...(input.after ?? [])],
    ...(input.checkpointer ? { checkpointer: input.checkpointer } : {}),
  });
}

/** A user message with a stable id. */
export const human = (content: string, id: string) => new HumanMessage({ content, id });

/** The tool messages of a conversation, with their content parsed when it is JSON. */
export function toolResults(messages: readonly BaseMessage[]) {
  return messages.filter(ToolMessage.isInstance).map((m) => {
    let content: unknown = m.content;
    try {
      content = JSON.parse(m.text);
    } catch {}
    return { content, status: m.status, id: m.tool_call_id, metadata: m.metadata };
  });
}

/** What the model was shown on its `index`-th call: the tool results in it. */
export const seenByModel = (model: FakeBuiltModel, index: number) =>
  toolResults(model.calls[index]?.messages ?? []);

export type { IdempotencyStore };
