/**
 * A small function-calling app over the real `@google/genai` client, shared by the tests and the
 * crash child: a ticket system that counts its side effects, a scripted model, and one user turn
 * through each surface of the adapter (automatic function calling, a hand-written loop, chats;
 * JSON and streamed).
 */
import { appendFileSync } from 'node:fs';
import {
  type CallableTool,
  type Content,
  type FunctionCall,
  type GenerateContentResponse,
  GoogleGenAI,
  type HttpOptions,
  type Part,
} from '@google/genai';
import { z } from 'zod';
import type { IdempotentFunctions } from '../index.js';
import type { ModelTurn, ScriptedReply } from '../testing/index.js';

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

/** A side effect that counts: in memory, and in a file when one is given. */
export function ticketSystem(effectsFile?: string) {
  const tickets: Array<{ id: string; title: string }> = [];
  return {
    tickets,
    create(args: { title: string; priority?: string }) {
      const ticket = { id: `T-${tickets.length + 1}`, title: args.title };
      tickets.push(ticket);
      if (effectsFile !== undefined) appendFileSync(effectsFile, `${JSON.stringify(ticket)}\n`);
      return { ticket: ticket.id, title: ticket.title, priority: args.priority ?? 'normal' };
    },
  };
}

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

/** One user turn: the history before it, what the user says, the app's system prompt. */
export interface Turn {
  history: Content[];
  text: string;
  system: string;
  conversationId: string | undefined;
}

export type Surface = 'afc' | 'afc-stream' | 'manual' | 'manual-stream' | 'chat' | 'chat-afc';

/** A streamed response read to its end: the model's content and its function calls. */
async function drained(stream: AsyncGenerator<GenerateContentResponse>) {
  let parts: Part[] = [];
  const calls: FunctionCall[] = [];
  for await (const chunk of stream) {
    const content = chunk.candidates?.[0]?.content;
    if (content?.role === 'user') {
      parts = []; // AFC sent the function responses: the model's next step follows
      continue;
    }
    parts.push(...(content?.parts ?? []));
    calls.push(...(chunk.functionCalls ?? []));
  }
  return { content: { role: 'model', parts } satisfies Content, calls };
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
  const contents = [...t.history, user(t.text)];
  const systemInstruction = t.system;
  switch (surface) {
    case 'afc':
    case 'afc-stream': {
      const config = { systemInstruction, tools: [fns.callable({ contents, conversationId })] };
      if (surface === 'afc') {
        return [
          ...contents,
          answerOf(await ai.models.generateContent({ model: MODEL, contents, config })),
        ];
      }
      const { content } = await drained(
        await ai.models.generateContentStream({ model: MODEL, contents, config }),
      );
      return [...contents, content];
    }
    case 'manual':
    case 'manual-stream': {
      for (let step = 0; step < 6; step++) {
        const params = { model: MODEL, contents, config: { systemInstruction, tools: [fns.tool] } };
        const { content, calls } =
          surface === 'manual'
            ? await ai.models.generateContent(params).then((r) => ({
                content: answerOf(r),
                calls: r.functionCalls ?? [],
              }))
            : await drained(await ai.models.generateContentStream(params));
        contents.push(content);
        if (calls.length === 0) return contents;
        contents.push({ role: 'user', parts: await fns.run(calls, { contents, conversationId }) });
      }
      throw new Error('too many steps');
    }
    case 'chat': {
      const config = { systemInstruction, tools: [fns.tool] };
      const chat = ai.chats.create({ model: MODEL, history: t.history, config });
      let response = await chat.sendMessage({ message: t.text });
      while (response.functionCalls?.length) {
        const parts = await fns.run(response, { chat, conversationId });
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
      const tools = [fns.callable({ chat, message: t.text, conversationId })];
      await chat.sendMessage({ message: t.text, config: { systemInstruction, tools } });
      return chat.getHistory(true);
    }
  }
}
