import { appendFileSync } from 'node:fs';
import { countEffects } from '@idempotent-tools/testing';
import { AIMessage } from '@langchain/core/messages';
import { fakeModel } from '@langchain/core/testing';
import { tool } from '@langchain/core/tools';
import { createAgent } from 'langchain';
import { z } from 'zod';
import { idempotentToolsMiddleware } from '../middleware.js';
import type { IdempotentToolsMiddlewareOptions } from '../types.js';
import { human } from './fixtures.js';

/**
 * The agent of the crash tests, shared by the child that dies and the parent that resumes: one
 * turn (thread + user message id) in which the model opens a ticket; the side effect is a line
 * appended to `effectsFile`.
 */
export function crashAgent(input: {
  effectsFile: string;
  options: IdempotentToolsMiddlewareOptions;
  /** Called right after the side effect (the child SIGKILLs itself there). */
  afterEffect?: () => void;
}) {
  const createTicket = tool(
    async ({ title }) => {
      appendFileSync(input.effectsFile, `${title}\n`);
      input.afterEffect?.();
      return { ticketId: `T-${countEffects(input.effectsFile)}`, title };
    },
    {
      name: 'create_ticket',
      description: 'Open a support ticket.',
      schema: z.object({ title: z.string() }),
    },
  );
  const model = fakeModel()
    .respondWithTools([{ name: 'create_ticket', args: { title: 'Login fails' } }])
    .respond(new AIMessage('Done.'));
  const agent = createAgent({
    model,
    tools: [createTicket],
    middleware: [idempotentToolsMiddleware(input.options)],
  });
  return (threadId: string) =>
    agent.invoke(
      { messages: [human('Open a ticket for the login bug', 'msg-1')] },
      { configurable: { thread_id: threadId } },
    );
}
