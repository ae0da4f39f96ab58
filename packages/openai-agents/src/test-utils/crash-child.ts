/**
 * A process that runs one turn and SIGKILLs itself after the side effect (before its outcome is
 * stored) or after the outcome is stored (before replying). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { ticketCrash } from '@idempotent-tools/testing';
import { Agent, run, setTracingDisabled, tool } from '@openai/agents';
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents/testing';
import { wrapAgentTools } from '../agents.js';
import { createIdempotency } from '../index.js';
import { CRASH_PROMPT, ticketArgs } from './app.js';

const { CRASH_MODE, CRASH_DB, CRASH_EFFECTS } = process.env;
const crash = ticketCrash({ mode: CRASH_MODE, effectsFile: CRASH_EFFECTS });
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: crash.onEvent,
});
const execute = (args: { title: string; priority: 'low' | 'normal' | 'high' }) =>
  crash.system.create(args);

setTracingDisabled(true);
const model = new ScriptedModel([
  [functionCall('create_ticket', { title: CRASH_PROMPT }, { callId: 'c1' })],
  [assistantMessage('done')],
]);
const ticket = tool({
  name: 'create_ticket',
  description: 'Open a ticket.',
  parameters: ticketArgs,
  execute,
});
await run(
  wrapAgentTools(idempotency, new Agent({ name: 'a', tools: [ticket], model })),
  CRASH_PROMPT,
  { context: { conversationId: 'chat-1' } },
);
console.log('the process was not killed');
