/**
 * The ticket app pieces the OpenAI adapters' tests share (the `openai` client and the Agents
 * SDK): the scripted ticket model, the crash scenarios' user message and the client's options.
 */
import type { ExpectLike } from '../expect.js';
import {
  type ModelTurn,
  type ScriptedReply,
  type ScriptedServer,
  startScriptedServer,
} from './openai.js';

/** The user message of the crash scenarios. */
export const CRASH_PROMPT = 'The printer is on fire';

/** Calls create_ticket once for the user's text, then answers with the tool outputs. */
export function ticketModel(turn: ModelTurn): ScriptedReply {
  if (turn.toolOutputs.length === 0) {
    return { toolCalls: [{ name: 'create_ticket', arguments: { title: turn.userText } }] };
  }
  return { content: `Done: ${turn.toolOutputs.join(' | ')}` };
}

/** The options of the tests' `new OpenAI(...)` against a scripted server at `baseURL`. */
export function openaiClientOptions(baseURL: string) {
  return { apiKey: 'test', baseURL, timeout: 2000, maxRetries: 2 };
}

/**
 * What the ticket tool's output must be in the run that resumes a crashed turn: the stored
 * outcome replayed (`after-persist`), or outcome-unknown (`after-effect`).
 */
export function expectResumedTicket(
  expect: ExpectLike,
  output: unknown,
  mode: 'after-effect' | 'after-persist',
  title = CRASH_PROMPT,
): void {
  if (mode === 'after-persist') {
    expect(output).toMatchObject({ ticket: 'T-1', title, replayed: true });
  } else {
    expect(output).toMatchObject({ error: 'outcome_unknown', next: 'check-first' });
  }
}

/**
 * Scripted servers started per test, with the client each test talks to them through;
 * `closeAll` (in an `afterEach`) closes the ones started since.
 */
export function scriptedServers<C>(client: (baseURL: string) => C) {
  const servers: ScriptedServer[] = [];
  return {
    async serve(respond: (turn: ModelTurn) => ScriptedReply) {
      const server = await startScriptedServer({ respond });
      servers.push(server);
      return { server, openai: client(server.baseURL) };
    },
    async closeAll() {
      await Promise.all(servers.splice(0).map((s) => s.close()));
    },
  };
}

/**
 * The findings' model: the user's words go to `send_message`, except small talk; after the
 * output, the model asks for the same call again once (a model repeating a call), then answers.
 */
export function sendModel(turn: ModelTurn, repeat = true): ScriptedReply {
  if (/^(Hi|Thanks|Draft)/.test(turn.userText)) return { content: 'Sure.' };
  const call = { name: 'send_message', arguments: { text: turn.userText } };
  if (turn.toolOutputs.length < (repeat ? 2 : 1)) return { toolCalls: [call] };
  return { content: `Sent: ${turn.toolOutputs.join(' | ')}` };
}
