import { createOpenAI } from '@ai-sdk/openai';
import {
  type Fault,
  type ModelTurn,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import type { LanguageModel } from 'ai';

/** One model response: tool calls (run in parallel within the step), or a final text. */
export type ScriptStep = { calls: Array<{ tool: string; input: unknown }> } | { text: string };

/** The OpenAI APIs the real `@ai-sdk/openai` client speaks: Chat Completions and Responses. */
export type Api = 'chat' | 'responses';
export const APIS: Api[] = ['chat', 'responses'];

export interface ScriptedModel {
  server: ScriptedServer;
  /** The real `@ai-sdk/openai` client over HTTP to the scripted server. */
  model(api: Api): LanguageModel;
  /** The tool outputs each model request carried after the last user message, as text. */
  seen: string[][];
  /** The text of the last user message of each model request. */
  prompts: string[];
  close(): Promise<void>;
}

/**
 * The repo's scripted OpenAI-compatible server (real HTTP), as an AI SDK model. `script`: the
 * replies in order (then a final text), or a function of each request.
 */
export async function startScriptedModel(
  script: ScriptStep[] | ((turn: ModelTurn) => ScriptedReply),
  faults: Array<Fault | undefined> = [],
): Promise<ScriptedModel> {
  const seen: string[][] = [];
  const prompts: string[] = [];
  let next = 0;
  const server = await startScriptedServer({
    faults,
    respond: (turn) => {
      seen.push(turn.toolOutputs);
      prompts.push(turn.userText);
      if (typeof script === 'function') return script(turn);
      const step = script[next++] ?? { text: 'done' };
      if ('text' in step) return { content: step.text };
      return {
        toolCalls: step.calls.map((c) => ({
          name: c.tool,
          arguments: c.input as Record<string, unknown>,
        })),
      };
    },
  });
  const openai = createOpenAI({ baseURL: server.baseURL, apiKey: 'test' });
  return {
    server,
    model: (api) => (api === 'chat' ? openai.chat('gpt-4o-mini') : openai('gpt-4o-mini')),
    seen,
    prompts,
    close: () => server.close(),
  };
}

/**
 * The scripted model of a support agent: on each user turn it calls `tool` once with the user's
 * words, then answers with what the tool returned.
 */
export function supportAgent(tool: string) {
  return (turn: ModelTurn): ScriptedReply =>
    turn.toolOutputs.length === 0
      ? { toolCalls: [{ name: tool, arguments: { request: turn.userText } }] }
      : { content: `Done. ${turn.toolOutputs.join(' ')}` };
}
