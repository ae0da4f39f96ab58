/**
 * The real loop over the real provider client: `createAgent` with `ChatOpenAI` from
 * `@langchain/openai`, over HTTP against the repo's scripted OpenAI-compatible server. Only the
 * model is scripted: it calls `carry_out` with the user's words once per user turn, then answers.
 */
import { type ScriptedServer, startScriptedServer } from '@idempotent-tools/testing/openai';
import type { BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

/** Chat Completions as JSON (`agent.invoke`), or as a stream (`agent.stream`, token events). */
export type Transport = 'json' | 'stream';
export const TRANSPORTS: Transport[] = ['json', 'stream'];

/** What the scripted model does in a user turn (the app's test sets it before the turn). */
export interface ModelScript {
  /** The tool it calls with the user's words. @default 'carry_out' */
  tool?: string;
  /** It calls the tool again with the same arguments after the first result (a glitch). */
  repeat?: boolean;
}

/**
 * The scripted model: the tool with the user's words (`script.tool`), again after its result
 * when `script.repeat`, then an answer that names the results.
 */
export const startModelServer = (script: ModelScript = {}) =>
  startScriptedServer({
    respond: (turn) =>
      turn.toolOutputs.length === 0 || (script.repeat === true && turn.toolOutputs.length === 1)
        ? {
            toolCalls: [
              { name: script.tool ?? 'carry_out', arguments: { request: turn.userText } },
            ],
          }
        : { content: `Done: ${turn.toolOutputs.join(' ')}` },
  });

/**
 * The real client. `maxRetries: 0`: a failed request reaches the app, which retries the turn
 * itself (with the client's own retries a lost reply would be retried inside the model call).
 */
export const chatModel = (server: ScriptedServer) =>
  new ChatOpenAI({
    model: 'scripted',
    apiKey: 'test',
    maxRetries: 0,
    configuration: { baseURL: server.baseURL },
  });

/**
 * The mutating tool; its side effect is a push to `effects` (what the "vendor" counts). With
 * `returnDirect`, it is `carry_out_now`, whose result ends the agent's run (no answer after it).
 */
export function carryOut(effects: string[], options: { returnDirect?: boolean } = {}) {
  const direct = options.returnDirect === true;
  return tool(
    async ({ request }) => {
      effects.push(request);
      return { done: request, receipt: `R-${effects.length}` };
    },
    {
      name: direct ? 'carry_out_now' : 'carry_out',
      description: direct
        ? "Carry out the user's request; its receipt is the answer."
        : "Carry out the user's request (cancel, send, charge...).",
      schema: z.object({ request: z.string() }),
      ...(direct ? { returnDirect: true } : {}),
    },
  );
}

interface Runnable {
  invoke(input: unknown, config?: object): Promise<{ messages: BaseMessage[] }>;
  stream(input: unknown, config?: object): Promise<AsyncIterable<unknown>>;
}

/**
 * One run of the agent as the app makes it: `invoke`, or `stream` with token events (the model
 * request is then streamed over SSE); resolves to the final state.
 */
export async function runAgent(
  agent: unknown,
  transport: Transport,
  input: unknown,
  config: object = {},
): Promise<{ messages: BaseMessage[] }> {
  const runnable = agent as Runnable;
  if (transport === 'json') return runnable.invoke(input, config);
  let state: { messages: BaseMessage[] } | undefined;
  const stream = await runnable.stream(input, { ...config, streamMode: ['messages', 'values'] });
  for await (const [mode, chunk] of stream as AsyncIterable<[string, unknown]>) {
    if (mode === 'values') state = chunk as { messages: BaseMessage[] };
  }
  if (state === undefined) throw new Error('the stream ended without a state');
  return state;
}
