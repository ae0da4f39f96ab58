/**
 * An Anthropic SDK agent whose retried tool calls are replayed. The real `@anthropic-ai/sdk`
 * client talks to a local scripted Messages server (offline, the default) or to the real API
 * (`ANTHROPIC_API_KEY` set). `create_ticket` runs through `@idempotent-tools/anthropic`:
 *
 * 1. Ann, through the SDK's tool runner (`idempotentToolRunner`, streamed): the model asks for
 *    the same ticket twice in one step (one runs, one is replayed); the stream breaks after the
 *    tool ran, the app runs the turn again: both calls are replayed. One ticket.
 * 2. Ann says the very same words in a later turn: a new turn, a new ticket.
 * 3. Bob, through a hand-written `messages.create` loop (`createToolDispatcher`), sends the same
 *    words in his own chat: a ticket of his own, not Ann's replayed.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { betaZodTool } from '@anthropic-ai/sdk/helpers/beta/zod';
import type { MessageParam, Tool } from '@anthropic-ai/sdk/resources/messages';
import {
  createIdempotency,
  createToolDispatcher,
  type Idempotency,
  idempotentToolRunner,
} from '@idempotent-tools/anthropic';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { type ModelTurn, startScriptedServer } from '@idempotent-tools/testing/anthropic';
import { z } from 'zod';

const ticketArgs = z.object({ title: z.string().min(1).describe('A short title of the problem') });
const SYSTEM = 'You are a helpdesk agent. Open exactly one ticket per problem with create_ticket.';
const PROBLEM = 'Please open a ticket: the printer on floor 3 is on fire.';

/** The side effect: a ticket system with no idempotency of its own. Tickets by request. */
class Helpdesk {
  readonly opened: Array<{ id: string; request: string }> = [];
  open(request: string, title: string) {
    const id = `T-${this.opened.length + 1}`;
    this.opened.push({ id, request });
    return { ticket: id, title };
  }
}

/** The scripted model: the same call twice in one step, then an answer naming the tickets. */
function scriptedModel(turn: ModelTurn) {
  if (turn.toolResults.length > 0) {
    const ids = [...new Set(turn.toolResults.map((r) => /T-\d+/.exec(r)?.[0]))];
    return { text: `Ticket ${ids.join(', ')} is open.` };
  }
  const call = { name: 'create_ticket', input: { title: 'Printer on floor 3 is on fire' } };
  return { toolUses: [call, call] };
}

export interface Result {
  transcript: string[];
  /** Tickets opened per request (`ann#1`: Ann's first turn). */
  ticketsBy: Record<string, number>;
}

/** What `npm start` checks: exactly one ticket per request, none twice, none missing. */
export function problems(result: Pick<Result, 'ticketsBy'>): string[] {
  const expected = ['ann#1', 'ann#2', 'bob#1'];
  const seen = new Set([...expected, ...Object.keys(result.ticketsBy)]);
  return [...seen].flatMap((request) => {
    const count = result.ticketsBy[request] ?? 0;
    const want = expected.includes(request) ? 1 : 0;
    return count === want ? [] : [`tickets for ${request}: ${count}, expected ${want}`];
  });
}

/** The tool results of a turn: how many calls, how many of them replayed. */
function results(messages: readonly MessageParam[]): string {
  const blocks = messages.flatMap((m) =>
    Array.isArray(m.content) ? m.content.flatMap((b) => (b.type === 'tool_result' ? [b] : [])) : [],
  );
  const replayed = blocks.filter((b) => /"replayed":true/.test(String(b.content))).length;
  return `${blocks.length} create_ticket call(s), ${replayed} replayed`;
}

export async function main(options: { print?: (line: string) => void; dataDir?: string } = {}) {
  const transcript: string[] = [];
  const print = (line: string) => {
    transcript.push(line);
    options.print?.(line);
  };
  const apiKey = process.env.ANTHROPIC_API_KEY;
  const server = apiKey ? undefined : await startScriptedServer({ respond: scriptedModel });
  const anthropic = new Anthropic(
    server ? { apiKey: 'offline', baseURL: server.baseURL, maxRetries: 2 } : { apiKey },
  );
  const model = process.env.ANTHROPIC_MODEL ?? 'claude-haiku-4-5';
  const dataDir = options.dataDir ?? fileURLToPath(new URL('../.demo-data', import.meta.url));
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const store = openSqliteStore(join(dataDir, 'anthropic-agent.db'));
  const idempotency = createIdempotency({ store });
  const helpdesk = new Helpdesk();
  print(`Model: ${server ? 'scripted (offline)' : model}`);
  try {
    const ann = await runnerTurn(
      anthropic,
      model,
      idempotency,
      helpdesk,
      server,
      [],
      'ann#1',
      print,
    );
    await runnerTurn(anthropic, model, idempotency, helpdesk, undefined, ann, 'ann#2', print);
    await dispatcherTurn(anthropic, model, idempotency, helpdesk, 'bob#1', print);
  } finally {
    store.close();
    await server?.close();
  }
  const ticketsBy: Record<string, number> = {};
  for (const { request } of helpdesk.opened) ticketsBy[request] = (ticketsBy[request] ?? 0) + 1;
  print(`Tickets: ${helpdesk.opened.map((t) => `${t.id} for ${t.request}`).join(', ')}`);
  return { transcript, ticketsBy };
}

type Print = (line: string) => void;

/**
 * One turn of Ann's chat through the SDK's tool runner. With `cut`, the reply after the tool ran
 * is lost (offline: a broken stream; with the real API the app aborts it) and the app runs the
 * turn again from the same history.
 */
async function runnerTurn(
  anthropic: Anthropic,
  model: string,
  idempotency: Idempotency,
  helpdesk: Helpdesk,
  cut: { inject(...faults: Array<'truncate'>): void } | undefined,
  history: MessageParam[],
  request: string,
  print: Print,
): Promise<MessageParam[]> {
  print(`\n[tool runner] ann (${request}): "${PROBLEM}"`);
  const messages: MessageParam[] = [...history, { role: 'user', content: PROBLEM }];
  for (let attempt = 1; ; attempt++) {
    const lose = request === 'ann#1' && attempt === 1;
    const abort = new AbortController();
    const createTicket = betaZodTool({
      name: 'create_ticket',
      description: 'Open a helpdesk ticket.',
      inputSchema: ticketArgs,
      run: ({ title }) => {
        const out = helpdesk.open(request, title);
        if (lose && cut) cut.inject('truncate');
        else if (lose) abort.abort(new Error('connection lost')); // the real API: the app cuts it
        return JSON.stringify(out);
      },
    });
    const runner = idempotentToolRunner(
      anthropic,
      { model, max_tokens: 1024, system: SYSTEM, messages, tools: [createTicket], stream: true },
      { idempotency, conversationId: 'chat-ann' },
      { signal: abort.signal },
    );
    try {
      const final = await runner;
      const sent = runner.params.messages as MessageParam[];
      const text = final.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      print(`  attempt ${attempt}: ${results(sent.slice(messages.length))}`);
      print(`  claude: ${shown(text)}`);
      return [...sent];
    } catch (error) {
      if (!lose) throw error;
      print(
        `  attempt ${attempt}: the reply was lost after the tool ran; the app runs the turn again`,
      );
    }
  }
}

/** Bob's chat: a hand-written `messages.create` loop with the dispatcher. */
async function dispatcherTurn(
  anthropic: Anthropic,
  model: string,
  idempotency: Idempotency,
  helpdesk: Helpdesk,
  request: string,
  print: Print,
) {
  print(`\n[messages.create loop] bob (${request}): "${PROBLEM}"`);
  const tools = createToolDispatcher(idempotency, {
    create_ticket: {
      schema: ticketArgs,
      execute: ({ title }: z.infer<typeof ticketArgs>) => helpdesk.open(request, title),
    },
  });
  const definition: Tool = {
    name: 'create_ticket',
    description: 'Open a helpdesk ticket.',
    input_schema: z.toJSONSchema(ticketArgs) as Tool.InputSchema,
  };
  const messages: MessageParam[] = [{ role: 'user', content: PROBLEM }];
  for (let step = 0; step < 5; step++) {
    const reply = await anthropic.messages.create({
      model,
      max_tokens: 1024,
      system: SYSTEM,
      messages,
      tools: tools.describe([definition]),
    });
    messages.push({ role: 'assistant', content: reply.content });
    if (reply.stop_reason !== 'tool_use') {
      const text = reply.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      print(`  ${results(messages)}`);
      print(`  claude: ${shown(text)}`);
      return;
    }
    messages.push(await tools.run(reply, { messages, conversationId: 'chat-bob' }));
  }
}

/** The model's answer, on one line (a real model's answer varies: only its length is stable). */
const shown = (text: string) =>
  process.env.ANTHROPIC_API_KEY ? `(${text.length > 0 ? 'answered' : 'no text'})` : text;
