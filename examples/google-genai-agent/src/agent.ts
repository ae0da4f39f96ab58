/**
 * A Gemini agent over a flaky network. The real `@google/genai` client talks to a local scripted
 * Gemini API server (or to Gemini when GEMINI_API_KEY is set) that cuts a reply, breaks a stream
 * and drops a connection after the function ran; the app sends the turn again. `create_ticket`
 * runs through `@idempotent-tools/google-genai`: the repeated calls are replayed (marked
 * `"replayed": true`), the ticket is opened once. Each chat passes its id (`conversationId`): the
 * same words in another chat, or in a later turn of the same chat, open a ticket of their own.
 *
 * 1. Automatic function calling (`models.generateContent` with `tools.callable(...)`): Ann.
 * 2. A hand-written loop over `models.generateContentStream` with `tools.run(...)`: Bob.
 * 3. A chat session (`ai.chats`) with automatic function calling in `sendMessage`: Cy.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type CallableTool,
  type Content,
  type FunctionCall,
  GoogleGenAI,
  type Part,
} from '@google/genai';
import { createIdempotency, idempotentFunctions } from '@idempotent-tools/google-genai';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { type ModelTurn, startScriptedServer } from '@idempotent-tools/testing/gemini';
import { z } from 'zod';

const ticketArgs = z.object({
  title: z.string().min(1).describe("The user's words, as they wrote them"),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});
type TicketArgs = z.infer<typeof ticketArgs>;
// The JSON Schema the model reads (Gemini takes it as `parametersJsonSchema`; no `$schema` key).
const { $schema: _, ...ticketParameters } = z.toJSONSchema(ticketArgs);

/** The side effect: a ticket system with no idempotency of its own. */
class TicketSystem {
  readonly tickets: Array<{ id: string; title: string; requester: string }> = [];
  requester = '';
  constructor(private readonly print: (line: string) => void) {}
  create(args: TicketArgs) {
    const ticket = {
      id: `T-${this.tickets.length + 1}`,
      title: args.title,
      requester: this.requester,
    };
    this.tickets.push(ticket);
    this.print(`    side effect: ticket ${ticket.id} opened for ${ticket.requester}`);
    return { ticket: ticket.id, title: args.title, priority: args.priority };
  }
}

const SYSTEM =
  'You open support tickets. For every problem the user reports, call create_ticket once with the user\'s words as the title and priority "high", then confirm the ticket id in one sentence.';

/** The scripted model: a chat's first turn asks for the same call twice (a duplicate in one step). */
function scriptedModel(turn: ModelTurn) {
  if (turn.functionResponses.length === 0) {
    const call = { name: 'create_ticket', args: { title: turn.userText, priority: 'high' } };
    const first = turn.contents.filter((c) => c.role === 'user').length === 1;
    return { functionCalls: first ? [call, call] : [call] };
  }
  return {
    text: `Ticket ${turn.functionResponses[0]?.response.ticket} is open; the team is on it.`,
  };
}

export interface MainOptions {
  print?: (line: string) => void;
  /** Where the SQLite store lives. @default <example>/.demo-data */
  dataDir?: string;
}

export interface Result {
  transcript: string[];
  /** Tickets opened per user. */
  ticketsBy: Record<string, number>;
  /** Function responses marked `replayed: true`. */
  replayed: number;
}

export async function main(options: MainOptions = {}): Promise<Result> {
  const transcript: string[] = [];
  const print = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const apiKey = process.env.GEMINI_API_KEY;
  const live = apiKey !== undefined && apiKey !== '';
  const dataDir = options.dataDir ?? fileURLToPath(new URL('../.demo-data', import.meta.url));
  const dbFile = join(dataDir, 'google-genai-agent.db');
  mkdirSync(dataDir, { recursive: true });
  for (const suffix of ['', '-wal', '-shm'])
    if (existsSync(dbFile + suffix)) rmSync(dbFile + suffix);

  // Ann: ok (two calls), cut (the answer), ok (calls again), ok (answer), then her second turn:
  // ok, ok. Bob (streamed): ok (two calls), broken stream, ok, ok. Cy (chat): ok, dropped, ok, ok.
  const server = live
    ? undefined
    : await startScriptedServer({
        respond: scriptedModel,
        faults: [undefined, 'truncate', undefined, undefined, undefined, undefined]
          .concat([undefined, 'truncate', undefined, undefined])
          .concat([undefined, 'drop']) as Array<'truncate' | 'drop' | undefined>,
      });
  const ai = new GoogleGenAI({
    apiKey: live ? apiKey : 'offline',
    ...(server ? { httpOptions: { baseUrl: server.baseUrl } } : {}),
  });
  const model = live ? (process.env.GEMINI_MODEL ?? 'gemini-2.5-flash') : 'gemini-2.5-flash';
  const config = { systemInstruction: SYSTEM, temperature: 0 };

  const store = openSqliteStore(dbFile);
  const system = new TicketSystem(print);
  const tools = idempotentFunctions(
    {
      create_ticket: {
        declaration: {
          description: 'Open a support ticket.',
          parametersJsonSchema: ticketParameters,
        },
        schema: ticketArgs,
        execute: (args: TicketArgs) => system.create(args),
      },
    },
    { idempotency: createIdempotency({ store }) },
  );
  let replayed = 0;
  const printCalls = (calls: readonly FunctionCall[]) => {
    for (const c of calls) print(`  model: ${c.name}(${JSON.stringify(c.args)})`);
  };
  const printResponses = (parts: readonly Part[]) => {
    for (const p of parts) {
      const response = p.functionResponse?.response ?? {};
      if (response.replayed === true) replayed++;
      print(`  tool -> ${JSON.stringify(response)}`);
    }
  };
  /** The bound callable tool, printing the calls the SDK hands it and what it answers. */
  const logged = (tool: CallableTool): CallableTool => ({
    tool: () => tool.tool(),
    callTool: async (calls) => {
      printCalls(calls);
      const parts = await tool.callTool(calls);
      printResponses(parts);
      return parts;
    },
  });
  /** One user turn, sent again when its reply is lost (live: the first answer is dropped on purpose). */
  const turn = async (
    who: string,
    text: string,
    lost: string,
    attempt: (n: number) => Promise<string>,
  ) => {
    system.requester = who;
    print(`  ${who}: ${text}`);
    for (let n = 1; ; n++) {
      try {
        const answer = await attempt(n);
        if (live && n === 1) throw new Error('the answer was dropped on purpose');
        print(`  model: ${answer}`);
        return;
      } catch (error) {
        if (n >= 3) throw error;
        const why = live ? (error as Error).message : lost;
        print(`  network: ${why} -> the app sends the turn again (attempt ${n + 1})`);
      }
    }
  };

  try {
    print(
      live
        ? `Google GenAI agent: ${model} (GEMINI_API_KEY is set)`
        : 'Google GenAI agent (offline: the real @google/genai client against a local scripted Gemini API server)',
    );
    print('Store: SQLite .demo-data/google-genai-agent.db');

    print('');
    print('1. Automatic function calling (models.generateContent), chat ann-1');
    const printer = 'The printer on floor 3 is on fire';
    let history: Content[] = [];
    for (const label of ['', ' (a new turn, the same words)']) {
      if (label !== '') print(`  -- ann's next turn${label}`);
      const contents: Content[] = [...history, { role: 'user', parts: [{ text: printer }] }];
      await turn('ann', printer, 'the reply was cut mid-body', async () => {
        const callable = logged(tools.callable({ contents, conversationId: 'ann-1' }));
        const response = await ai.models.generateContent({
          model,
          contents,
          config: { ...config, tools: [callable] },
        });
        history = [...contents, response.candidates?.[0]?.content ?? { role: 'model', parts: [] }];
        return response.text ?? '';
      });
    }

    print('');
    print('2. A hand-written loop over models.generateContentStream, chat bob-1 (the same words)');
    await turn('bob', printer, 'the stream broke', async () => {
      const contents: Content[] = [{ role: 'user', parts: [{ text: printer }] }];
      for (;;) {
        const stream = await ai.models.generateContentStream({
          model,
          contents,
          config: { ...config, tools: [tools.tool] },
        });
        const parts: Part[] = [];
        const calls: FunctionCall[] = [];
        for await (const chunk of stream) {
          parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
          calls.push(...(chunk.functionCalls ?? []));
        }
        contents.push({ role: 'model', parts });
        if (calls.length === 0) return parts.map((p) => p.text ?? '').join('');
        printCalls(calls);
        const responses = await tools.run(calls, { contents, conversationId: 'bob-1' });
        printResponses(responses);
        contents.push({ role: 'user', parts: responses });
      }
    });

    print('');
    print('3. A chat session (ai.chats) with automatic function calling, chat cy-1');
    const vpn = 'The VPN drops every five minutes';
    await turn('cy', vpn, 'the connection dropped', async () => {
      // The app rebuilds the chat from its saved history on every attempt (here: none yet).
      const chat = ai.chats.create({ model, config, history: [] });
      const callable = logged(tools.callable({ chat, message: vpn, conversationId: 'cy-1' }));
      const response = await chat.sendMessage({
        message: vpn,
        config: { ...config, tools: [callable] },
      });
      return response.text ?? '';
    });
  } finally {
    store.close();
    await server?.close();
  }

  const ticketsBy: Record<string, number> = {};
  for (const t of system.tickets) ticketsBy[t.requester] = (ticketsBy[t.requester] ?? 0) + 1;
  print('');
  print(
    `Tickets: ${system.tickets.map((t) => `${t.id} (${t.requester})`).join(', ')}; replayed responses: ${replayed}`,
  );
  return { transcript, ticketsBy, replayed };
}

/** What `npm start` checks: Ann's two turns opened two tickets, Bob and Cy one each. */
export const EXPECTED: Readonly<Record<string, number>> = { ann: 2, bob: 1, cy: 1 };

export function problems(result: Pick<Result, 'ticketsBy'>): string[] {
  const users = new Set([...Object.keys(EXPECTED), ...Object.keys(result.ticketsBy)]);
  const found: string[] = [];
  for (const user of [...users].sort()) {
    const got = result.ticketsBy[user] ?? 0;
    const want = EXPECTED[user] ?? 0;
    if (got !== want) found.push(`tickets for ${user}: ${got}, expected ${want}`);
  }
  return found;
}
