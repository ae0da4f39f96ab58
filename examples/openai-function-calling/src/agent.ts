/**
 * OpenAI function calling over a flaky network. The real `openai` client talks to a local
 * OpenAI-compatible server that drops a connection after the request arrived (the SDK retries)
 * and cuts a reply mid-body (the app runs the turn again). The `create_ticket` tool runs through
 * `@idempotent-tools/openai`: the model's repeated calls are replayed, the ticket is opened once.
 * Each chat passes its id (`conversationId`), as a real app does: a second user who sends the
 * very same words gets a ticket of their own, not the first user's replayed.
 *
 * Part 1: Chat Completions with `createToolDispatcher` (Ann, then Bob with the same words).
 * Part 2: the Agents SDK with `wrapAgentTools` of `@idempotent-tools/openai-agents` (Cy).
 * Offline by default; the real API when OPENAI_API_KEY is set (then the lost answer is simulated
 * by the app, since a real network cannot be made to fail on cue).
 * Part 3 (offline only): deliberate repeats. `send_reminder` is `repeatable`: the model's retry
 * of a call is replayed, `repeat: 2` sends a second reminder on purpose, its retry is replayed.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createIdempotency,
  createToolDispatcher,
  type Idempotency,
  type ToolDispatcher,
} from '@idempotent-tools/openai';
import { wrapAgentTools } from '@idempotent-tools/openai-agents';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import {
  type ModelTurn,
  type ScriptedReply,
  startScriptedServer,
} from '@idempotent-tools/testing/openai';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import type {
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';
import { z } from 'zod';

const ticketArgs = z.object({
  title: z.string().min(1).describe('A short title of the problem'),
  priority: z.enum(['low', 'normal', 'high']).default('normal'),
});
type TicketArgs = z.infer<typeof ticketArgs>;

const reminderArgs = z.object({
  to: z.string().min(1).describe('Who to remind'),
  about: z.string().min(1).describe('What to remind them of'),
});
type ReminderArgs = z.infer<typeof reminderArgs>;

/**
 * The side effects, with no idempotency of their own: tickets, and reminders (each send is one
 * more message in someone's inbox). `effects` holds their transcript lines, in order.
 */
class TicketSystem {
  readonly tickets: Array<{ id: string; title: string; requester: string }> = [];
  readonly reminders: Array<{ to: string; about: string; requester: string }> = [];
  readonly effects: string[] = [];
  create(args: TicketArgs, requester: string) {
    const ticket = { id: `T-${this.tickets.length + 1}`, title: args.title, requester };
    this.tickets.push(ticket);
    this.effects.push(`    side effect: ticket ${ticket.id} opened for ${requester}`);
    return { ticket: ticket.id, title: args.title, priority: args.priority };
  }
  remind(args: ReminderArgs, requester: string) {
    this.reminders.push({ ...args, requester });
    const n = this.reminders.length;
    this.effects.push(`    side effect: reminder ${n} sent to ${args.to} (from ${requester})`);
    return { reminder: n, to: args.to };
  }
}

/** A chat of the app: its id is the conversation identity the tools are keyed by. */
interface Chat {
  id: string;
  user: string;
}

/** The scripted model of the offline run: two identical calls (a parallel duplicate) for chat. */
function scriptedModel(turn: ModelTurn): ScriptedReply {
  if (offered(turn).includes('send_reminder')) return reminderModel(turn);
  if (turn.toolOutputs.length === 0) {
    const call = { name: 'create_ticket', arguments: { title: turn.userText, priority: 'high' } };
    return { toolCalls: turn.api === 'chat' ? [call, call] : [call] };
  }
  const { ticket } = JSON.parse(turn.toolOutputs[0] ?? '{}') as { ticket?: string };
  return { content: `Ticket ${ticket} is open; the team is on it.` };
}

/** The names of the tools a request offers the model (Chat Completions or Responses). */
const offered = (turn: ModelTurn) =>
  ((turn.body.tools ?? []) as Array<{ name?: string; function?: { name?: string } }>).map(
    (t) => t.function?.name ?? t.name,
  );

/**
 * Dan's model (part 3), one call per step: the reminder, the same call again (a retry, as a model
 * does when unsure the first went through), then the reminder once more on purpose (`repeat: 2`,
 * as the tool's description tells it), and that call again too (a retry of the repeat).
 */
function reminderModel(turn: ModelTurn): ScriptedReply {
  const args = { to: 'eve', about: 'the 3pm review' };
  const remind = (repeat?: number) => ({
    toolCalls: [{ name: 'send_reminder', arguments: repeat ? { ...args, repeat } : args }],
  });
  const step = turn.toolOutputs.length;
  if (step < 2) return remind();
  if (step < 4) return remind(2);
  return { content: 'Eve got two reminders of the 3pm review.' };
}

const errorText = (error: unknown) =>
  `${(error as Error).message}${(error as Error).cause ? ` (${(error as { cause: Error }).cause.message})` : ''}`;

export interface MainOptions {
  print?: (line: string) => void;
  /** Where the SQLite store lives. @default <example>/.demo-data */
  dataDir?: string;
}

export async function main(options: MainOptions = {}) {
  const transcript: string[] = [];
  const print = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const live = process.env.OPENAI_API_KEY !== undefined && process.env.OPENAI_API_KEY !== '';
  const dataDir = options.dataDir ?? fileURLToPath(new URL('../.demo-data', import.meta.url));
  const dbFile = join(dataDir, 'openai-function-calling.db');
  mkdirSync(dataDir, { recursive: true });
  for (const suffix of ['', '-wal', '-shm']) {
    if (existsSync(dbFile + suffix)) rmSync(dbFile + suffix);
  }
  setTracingDisabled(true);

  const server = live
    ? undefined
    : await startScriptedServer({
        respond: scriptedModel,
        // Ann: dropped, ok (tool calls), cut (the answer), ok (tool calls again), ok (answer);
        // Bob: ok (tool calls), ok (answer);
        // Cy (agents): dropped, ok (tool call), cut, ok (tool call again), ok (answer)
        faults: [
          'drop',
          undefined,
          'truncate',
          undefined,
          undefined,
          undefined,
          undefined,
          'drop',
          undefined,
          'truncate',
        ],
      });
  const model = live ? (process.env.OPENAI_MODEL ?? 'gpt-4.1-mini') : 'scripted';
  /** The model's client: logs what the network does to it. */
  const openai = new OpenAI({
    ...(server ? { apiKey: 'offline', baseURL: server.baseURL } : {}),
    maxRetries: 2,
    fetch: async (input, init) => {
      try {
        return await fetch(input, init);
      } catch (error) {
        print(`  network: ${errorText(error)} -> the openai SDK retries the request`);
        throw error;
      }
    },
  });
  const store = openSqliteStore(dbFile);
  const idempotency = createIdempotency({ store });
  const system = new TicketSystem();
  let replayed = 0;
  const countReplays = (output: string) => {
    if (output.includes('"replayed":true')) replayed++;
  };
  let remindersReplayed = 0;
  const countReminderReplays = (output: string) => {
    if (output.includes('"replayed":true')) remindersReplayed++;
  };

  print(
    `OpenAI function calling over a flaky network (${live ? `real API, ${model}` : 'offline: a scripted OpenAI-compatible server on 127.0.0.1'})`,
  );
  print(`Store: SQLite ${relative(process.cwd(), dbFile) || dbFile}`);
  const prompt = 'The printer on floor 3 is on fire';
  try {
    print('\n1. Chat Completions + createToolDispatcher');
    const chat = { openai, model, idempotency, system, print, countReplays };
    await chatCompletions(chat, { id: 'chat-ann-1', user: 'ann' }, prompt, live);
    print('  -- another user, the very same words: a ticket of their own --');
    await chatCompletions(chat, { id: 'chat-bob-1', user: 'bob' }, prompt, false);
    print('\n2. Agents SDK + wrapAgentTools');
    await agentsSdk(chat, { id: 'chat-cy-1', user: 'cy' }, live);
    print('\n3. Deliberate repeats: send_reminder is repeatable');
    if (live) {
      print('  offline only: a real model retries and repeats when it decides to, not on cue');
    } else {
      const remind = { ...chat, countReplays: countReminderReplays };
      const dan = { id: 'chat-dan-1', user: 'dan' };
      await chatCompletions(remind, dan, 'Remind Eve of the 3pm review, twice', false, reminders);
    }
  } finally {
    store.close();
    await server?.close();
  }
  const requests = system.tickets.map((t) => `${t.requester}: ${t.title}`);
  const duplicates = requests.length - new Set(requests).size;
  print(
    `\n${system.tickets.length} ticket(s) opened for 3 requests of 3 users; ${replayed} repeated call(s) replayed; ${duplicates} duplicate(s).`,
  );
  // Offline, Dan asked for two reminders: the model's retries replayed, `repeat: 2` sent the second.
  const sent = live ? undefined : system.reminders.length;
  if (sent !== undefined) {
    print(
      `${sent} reminder(s) sent of the 2 Dan asked for (the second on purpose: repeat: 2); ${remindersReplayed} retried call(s) replayed.`,
    );
  }
  const users = system.tickets.map((t) => t.requester);
  const ticketsBy: Record<string, number> = {};
  for (const user of users) ticketsBy[user] = (ticketsBy[user] ?? 0) + 1;
  return {
    sideEffects: system.tickets.length,
    duplicates,
    replayed,
    users,
    ticketsBy,
    reminders: sent,
    remindersReplayed,
    transcript,
  };
}

/**
 * What `npm start` (and the root `pnpm demo`, through it) checks: one ticket each for Ann, Bob
 * and Cy. A ticket opened twice, one that is missing (Bob handed Ann's ticket, replayed, has
 * none of his own) or one for someone else is a problem; `[]` when all is well. Offline also two
 * reminders for Dan (`reminders`; `undefined`: part 3 did not run): a retry that sent one again
 * is a problem, and so is a `repeat: 2` replayed instead of sent.
 */
export function problems(result: {
  ticketsBy: Record<string, number>;
  reminders?: number | undefined;
}): string[] {
  const expected: Record<string, number> = { ann: 1, bob: 1, cy: 1 };
  const found: string[] = [];
  for (const who of Object.keys({ ...expected, ...result.ticketsBy })) {
    const want = expected[who] ?? 0;
    const got = result.ticketsBy[who] ?? 0;
    if (got > want) found.push(`ticket for ${who}: ${got}, expected ${want}`);
    else if (got < want)
      found.push(`ticket for ${who} is missing (or was replayed from another user's)`);
  }
  if (result.reminders !== undefined && result.reminders !== 2) {
    found.push(`reminders for dan: ${result.reminders}, expected 2 (one, then repeat: 2)`);
  }
  return found;
}

interface App {
  openai: OpenAI;
  model: string;
  idempotency: Idempotency;
  system: TicketSystem;
  print: (line: string) => void;
  countReplays: (output: string) => void;
}

/** The tools of a chat: the dispatcher over them, their definitions as the model sees them. */
interface Desk {
  instructions: string;
  tools: ToolDispatcher;
  definitions: ChatCompletionFunctionTool[];
  /** What the model is told that is worth printing. */
  note?: string;
}

/** Parts 1 and 2: `create_ticket`, the retry notes in its description. */
function helpdesk({ idempotency, system }: App, chat: Chat): Desk {
  const tools = createToolDispatcher(idempotency, {
    create_ticket: {
      schema: ticketArgs,
      execute: (args: TicketArgs) => system.create(args, chat.user),
    },
  });
  const definitions: ChatCompletionFunctionTool[] = tools.describe([
    {
      type: 'function',
      function: {
        name: 'create_ticket',
        description: 'Open a support ticket.',
        parameters: z.toJSONSchema(ticketArgs) as Record<string, unknown>,
      },
    },
  ]);
  const instructions = 'You are a helpdesk agent. Open a ticket for every problem.';
  return { instructions, tools, definitions };
}

/**
 * Part 3: `send_reminder`, repeatable. `describe` adds an optional `repeat` integer to its
 * parameters and says in its description how to use it; the tool never sees `repeat`.
 */
function reminders({ idempotency, system }: App, chat: Chat): Desk {
  const tools = createToolDispatcher(
    idempotency,
    {
      send_reminder: {
        schema: reminderArgs,
        execute: (args: ReminderArgs) => system.remind(args, chat.user),
      },
    },
    { policies: { send_reminder: { repeatable: true } } },
  );
  const definitions: ChatCompletionFunctionTool[] = tools.describe([
    {
      type: 'function',
      function: {
        name: 'send_reminder',
        description: 'Send someone a reminder.',
        parameters: z.toJSONSchema(reminderArgs) as Record<string, unknown>,
      },
    },
  ]);
  const told = definitions[0]?.function.description?.match(/Calling this tool again.*$/s)?.[0];
  const instructions = 'You are an assistant. Send the reminders the user asks for.';
  return { instructions, tools, definitions, ...(told ? { note: told } : {}) };
}

async function chatCompletions(
  app: App,
  chat: Chat,
  prompt: string,
  live: boolean,
  desk: (app: App, chat: Chat) => Desk = helpdesk,
) {
  const { openai, model, system, print, countReplays } = app;
  const { instructions, tools, definitions, note } = desk(app, chat);
  const history: ChatCompletionMessageParam[] = [
    { role: 'system', content: instructions },
    { role: 'user', content: prompt },
  ];
  print(`  ${chat.user} (${chat.id}): ${prompt}`);
  if (note !== undefined) print(`  (the model is told: "${note}")`);
  let loseAnswer = live; // with the real API the app simulates the lost answer once
  for (let attempt = 1; attempt <= 3; attempt++) {
    const messages = [...history]; // the app saved the user message only: the turn restarts
    try {
      for (let step = 0; step < 6; step++) {
        if (step > 0 && loseAnswer) {
          loseAnswer = false;
          throw new Error('simulated: the answer was lost on the way');
        }
        const completion = await openai.chat.completions.create({
          model,
          messages,
          tools: definitions,
        });
        const message = completion.choices[0]?.message;
        if (message === undefined) throw new Error('no answer');
        messages.push(message);
        if (!message.tool_calls?.length) {
          print(`  model: ${message.content}`);
          return;
        }
        for (const call of message.tool_calls) {
          if (call.type === 'function')
            print(`  model: ${call.function.name}(${call.function.arguments}) [${call.id}]`);
        }
        // The calls of one message run in parallel: their side effects, then their results in
        // the order of the calls, once all are done (a transcript in the same order every run).
        const before = system.effects.length;
        // The chat id tells this conversation from every other one with the same words.
        const outputs = await tools.runChat(message, { messages, conversationId: chat.id });
        for (const line of system.effects.slice(before)) print(line);
        for (const out of outputs) {
          print(`  tool -> ${out.content} [${out.tool_call_id}]`);
          countReplays(out.content as string);
          messages.push(out);
        }
      }
    } catch (error) {
      print(
        `  network: ${errorText(error)} -> the app runs the turn again (attempt ${attempt + 1})`,
      );
    }
  }
}

async function agentsSdk(app: App, chat: Chat, live: boolean) {
  const { openai, model, idempotency, system, print, countReplays } = app;
  const createTicket = tool({
    name: 'create_ticket',
    description: 'Open a support ticket.',
    parameters: ticketArgs,
    execute: (args) => system.create(args, chat.user),
  });
  const agent = wrapAgentTools(
    idempotency,
    new Agent({
      name: 'helpdesk',
      instructions: 'You are a helpdesk agent. Open a ticket for every problem.',
      tools: [createTicket],
      model: new OpenAIResponsesModel(openai, model),
    }),
  );
  // The tool calls of one run, printed when the run is over (its calls may run in parallel):
  // the calls, their side effects, then their results, in the order the calls started.
  let calls: Array<{ call: string; output?: string }> = [];
  let before = 0;
  agent.on('agent_tool_start', (_ctx, _tool, { toolCall }) => {
    if (toolCall.type === 'function_call') {
      calls.push({ call: `${toolCall.name}(${toolCall.arguments}) [${toolCall.callId}]` });
    }
  });
  agent.on('agent_tool_end', (_ctx, _tool, output, { toolCall }) => {
    const id = (toolCall as { callId?: string }).callId;
    const entry = calls.find((c) => c.call.endsWith(` [${id}]`));
    if (entry) entry.output = `${output} [${id}]`;
    countReplays(output);
  });
  const flush = () => {
    for (const c of calls) print(`  model: ${c.call}`);
    for (const line of system.effects.slice(before)) print(line);
    for (const c of calls) if (c.output !== undefined) print(`  tool -> ${c.output}`);
    calls = [];
    before = system.effects.length;
  };
  const input = 'The VPN drops every five minutes';
  print(`  ${chat.user} (${chat.id}): ${input}`);
  let loseAnswer = live;
  for (let attempt = 1; attempt <= 3; attempt++) {
    before = system.effects.length;
    try {
      // The chat id travels in the run context (and in a saved RunState, for approvals).
      const result = await run(agent, input, {
        maxTurns: 4,
        context: { conversationId: chat.id },
      }).finally(flush);
      if (loseAnswer) {
        loseAnswer = false;
        throw new Error('simulated: the answer was lost on the way');
      }
      print(`  model: ${result.finalOutput}`);
      return;
    } catch (error) {
      print(
        `  network: ${errorText(error)} -> the app runs the agent again (attempt ${attempt + 1})`,
      );
    }
  }
}
