/**
 * The real loop: Mastra's `Agent` with its own model router (`{ id: 'openai/...', url }`) over
 * HTTP against the repo's scripted OpenAI-compatible server, Chat Completions or Responses, JSON
 * (`agent.generate`) or SSE (`agent.stream`). Only the model is scripted: it calls `carry_out`
 * with the user's words once per user turn, then answers. Memory: Mastra's `Memory` on a LibSQL
 * file, as an app keeps its threads.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelTurn } from '@idempotent-tools/testing/openai';
import {
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import { Agent } from '@mastra/core/agent';
import { Mastra } from '@mastra/core/mastra';
import { createTool } from '@mastra/core/tools';
import { LibSQLStore } from '@mastra/libsql';
import { Memory } from '@mastra/memory';
import { z } from 'zod';

export type Transport = 'generate' | 'stream';
export type Api = 'chat' | 'responses';

/** The scripted model: `carry_out` with the user's words, then an answer naming its result. */
export const carryOutModel = (turn: ModelTurn): ScriptedReply =>
  turn.toolOutputs.length === 0
    ? { toolCalls: [{ name: 'carry_out', arguments: { request: turn.userText } }] }
    : { content: `Done: ${turn.toolOutputs.join(' ')}` };

export const startModelServer = (respond = carryOutModel) => startScriptedServer({ respond });

/** The model as an app configures it: Mastra's router pointed at the server. */
export const modelOf = (server: ScriptedServer, api: Api = 'chat') => ({
  id: 'openai/gpt-4o-mini' as const,
  url: server.baseURL,
  apiKey: 'test',
  api,
});

/** The mutating tool; its side effect is a push to `effects` (what the "vendor" counts). */
export function carryOut(effects: string[], requireApproval = false) {
  return createTool({
    id: 'carry_out',
    description: "Carry out the user's request (cancel, send, charge...).",
    inputSchema: z.object({ request: z.string() }),
    outputSchema: z.object({ done: z.string(), receipt: z.string() }),
    requireApproval,
    execute: async ({ request }) => {
      effects.push(request);
      return { done: request, receipt: `R-${effects.length}` };
    },
  });
}

/** Memory on a LibSQL file (threads and messages survive the process). */
export function libsql(file = join(mkdtempSync(join(tmpdir(), 'mastra-adapter-')), 'mastra.db')) {
  return new LibSQLStore({ id: 'app', url: `file:${file}` });
}

export interface AgentSetup {
  server: ScriptedServer;
  // biome-ignore lint/suspicious/noExplicitAny: any tools record
  tools: Record<string, any>;
  api?: Api;
  instructions?: string;
  storage?: LibSQLStore;
}

/** An agent registered on a Mastra instance (with storage: memory and run snapshots). */
export function makeAgent({ server, tools, api, instructions, storage }: AgentSetup) {
  const agent = new Agent({
    id: 'desk',
    name: 'desk',
    instructions: instructions ?? 'You are a helpful agent.',
    model: modelOf(server, api),
    tools,
    maxRetries: 0, // a failed model request reaches the app, which retries the turn itself
    ...(storage === undefined ? {} : { memory: new Memory({ storage }) }),
  });
  const mastra = new Mastra({
    agents: { desk: agent },
    logger: false,
    ...(storage ? { storage } : {}),
  });
  return mastra.getAgent('desk');
}

type Desk = ReturnType<typeof makeAgent>;
type Options = Record<string, unknown>;

/**
 * One run as the app makes it: `generate` (the model answers as JSON) or `stream` (SSE), read to
 * its end. Rejects when the run failed (a broken stream, a lost reply).
 */
export async function runAgent(
  agent: Desk,
  transport: Transport,
  input: unknown,
  options: Options,
) {
  const out =
    transport === 'generate'
      ? await agent.generate(input as never, options as never)
      : await (await agent.stream(input as never, options as never)).getFullOutput();
  if (out.error !== undefined) throw out.error;
  return out;
}
