/**
 * A small function-calling app over the real `@google/genai` client, shared by the tests and the
 * crash child: a ticket system that counts its side effects, a scripted model, and one user turn
 * through each surface of the adapter (automatic function calling, a hand-written loop, chats;
 * JSON and streamed).
 */
import {
  type CallableTool,
  type Content,
  type ContentListUnion,
  type GenerateContentResponse,
  GoogleGenAI,
  type HttpOptions,
  type PartListUnion,
} from '@google/genai';
import type { ticketSystem } from '@idempotent-tools/testing';
import type { ModelTurn, ScriptedReply } from '@idempotent-tools/testing/gemini';
import { z } from 'zod';
import type { IdempotentFunctions } from '../index.js';

export { ticketSystem } from '@idempotent-tools/testing';

export const MODEL = 'gemini-2.5-flash';
export const CRASH_PROMPT = 'Open a ticket: the printer is on fire.';

export const ticketArgs = z.object({
  title: z.string().min(1),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});

export const ticketDeclaration = {
  description: 'Open a support ticket.',
  parametersJsonSchema: z.toJSONSchema(ticketArgs),
};

/** Opens a ticket titled with the user's words once per turn, then answers with the responses. */
export function ticketModel(turn: ModelTurn): ScriptedReply {
  if (turn.functionResponses.length === 0) {
    return { functionCalls: [{ name: 'create_ticket', args: { title: turn.userText } }] };
  }
  return {
    text: `Done: ${turn.functionResponses.map((r) => JSON.stringify(r.response)).join(' | ')}`,
  };
}

/** The ticket system as a CallableTool of its own (as `mcpToTool` makes one), unwrapped. */
export function ticketCallable(system: ReturnType<typeof ticketSystem>): CallableTool {
  return {
    tool: async () => ({ functionDeclarations: [{ name: 'create_ticket', ...ticketDeclaration }] }),
    callTool: async (calls) =>
      calls.map((c) => ({
        functionResponse: {
          ...(c.id === undefined ? {} : { id: c.id }),
          name: c.name ?? '',
          response: system.create(c.args as { title: string }),
        },
      })),
  };
}

export const client = (baseUrl: string, extra: HttpOptions = {}) =>
  new GoogleGenAI({ apiKey: 'test', httpOptions: { baseUrl, ...extra } });

export const user = (text: string): Content => ({ role: 'user', parts: [{ text }] });

/** How the user's message is sent: a `Content`, a string, text parts (`[{ text }]`). */
export type Shape = 'content' | 'string' | 'parts';

/** One user turn: the history before it, what the user says, the app's system prompt. */
export interface Turn {
  history: Content[];
  text: string;
  system: string;
  conversationId: string | undefined;
  /**
   * The shape of the user's message. `models.*` take a string or parts only as the whole
   * `contents` (no history): with a history the message is a `Content`. A chat's `sendMessage`
   * takes a string or parts (`content` is sent as its parts). @default 'content' (chats: 'string')
   */
  shape?: Shape | undefined;
  /**
   * The turn ends on the function responses, with no text from the model after them: the
   * hand-written loop stops once it has them; automatic function calling gets
   * `maximumRemoteCalls: 1`.
   */
  answeredByTool?: boolean | undefined;
}

export type Surface = 'afc' | 'afc-stream' | 'manual' | 'manual-stream' | 'chat' | 'chat-afc';

/**
 * A streamed response read to its end: the contents it added, in order (a `user` chunk is AFC
 * sending the function responses, and the model's next step follows), and the function calls of
 * the last model content.
 */
async function drained(stream: AsyncGenerator<GenerateContentResponse>) {
  const contents: Content[] = [];
  for await (const chunk of stream) {
    const content = chunk.candidates?.[0]?.content;
    if (content === undefined) continue;
    const role = content.role ?? 'model';
    const last = contents.at(-1);
    if (last !== undefined && last.role === role && role === 'model') {
      last.parts = [...(last.parts ?? []), ...(content.parts ?? [])];
    } else contents.push({ role, parts: [...(content.parts ?? [])] });
  }
  if (contents.at(-1)?.role !== 'model') contents.push({ role: 'model', parts: [] });
  const content = contents.at(-1) as Content;
  const calls = (content.parts ?? []).flatMap((p) => (p.functionCall ? [p.functionCall] : []));
  return { contents, content, calls };
}

const answerOf = (r: GenerateContentResponse): Content =>
  r.candidates?.[0]?.content ?? { role: 'model', parts: [] };

/** Runs one user turn through a surface; resolves to the history after it (with the answer). */
export async function runTurn(
  ai: GoogleGenAI,
  fns: IdempotentFunctions,
  surface: Surface,
  t: Turn,
): Promise<Content[]> {
  const { conversationId } = t;
  const said = user(t.text);
  const list = [...t.history, said]; // the conversation as the app keeps it
  const shape = t.shape ?? (surface.startsWith('chat') ? 'string' : 'content');
  // What the first request sends: a string or parts only as the whole contents.
  const contents: ContentListUnion =
    t.history.length > 0 || shape === 'content'
      ? list
      : shape === 'string'
        ? t.text
        : [{ text: t.text }];
  const message: PartListUnion = shape === 'string' ? t.text : [{ text: t.text }];
  const systemInstruction = t.system;
  const afc = t.answeredByTool ? { automaticFunctionCalling: { maximumRemoteCalls: 1 } } : {};
  switch (surface) {
    case 'afc':
    case 'afc-stream': {
      const tools = [fns.callable({ contents, conversationId })];
      const config = { systemInstruction, tools, ...afc };
      if (surface === 'afc') {
        const response = await ai.models.generateContent({ model: MODEL, contents, config });
        // Ended on the function responses: the SDK's own record of the turn (each call and its
        // responses) is all the app has of it. Else the app keeps the answer (AFC keeps its steps).
        if (t.answeredByTool) return response.automaticFunctionCallingHistory ?? list;
        return [...list, answerOf(response)];
      }
      const streamed = await drained(
        await ai.models.generateContentStream({ model: MODEL, contents, config }),
      );
      return [...list, streamed.content];
    }
    case 'manual':
    case 'manual-stream': {
      for (let step = 0; step < 6; step++) {
        const sent = step === 0 ? contents : [...list];
        const params = {
          model: MODEL,
          contents: sent,
          config: { systemInstruction, tools: [fns.tool] },
        };
        const { content, calls } =
          surface === 'manual'
            ? await ai.models.generateContent(params).then((r) => ({
                content: answerOf(r),
                calls: r.functionCalls ?? [],
              }))
            : await drained(await ai.models.generateContentStream(params));
        list.push(content);
        if (calls.length === 0) return list;
        const parts = await fns.run(calls, { contents: list, conversationId });
        list.push({ role: 'user', parts });
        if (t.answeredByTool) return list; // the app's loop stops on the function responses
      }
      throw new Error('too many steps');
    }
    case 'chat': {
      const config = { systemInstruction, tools: [fns.tool] };
      const chat = ai.chats.create({ model: MODEL, history: t.history, config });
      let response = await chat.sendMessage({ message });
      while (response.functionCalls?.length) {
        const parts = await fns.run(response, { chat, conversationId });
        // A chat records a function response only by sending it: the app keeps it itself.
        if (t.answeredByTool) return [...chat.getHistory(true), { role: 'user', parts }];
        response = await chat.sendMessage({ message: parts });
      }
      return chat.getHistory(true);
    }
    case 'chat-afc': {
      const chat = ai.chats.create({
        model: MODEL,
        history: t.history,
        config: { systemInstruction },
      });
      const tools = [fns.callable({ chat, message, conversationId })];
      await chat.sendMessage({ message, config: { systemInstruction, tools, ...afc } });
      return chat.getHistory(true);
    }
  }
}
