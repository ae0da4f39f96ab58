/**
 * A process that runs one turn and SIGKILLs itself after the side effect (before its outcome is
 * stored) or after the outcome is stored (before replying). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { Agent, run, setTracingDisabled, tool } from '@openai/agents';
import { assistantMessage, functionCall, ScriptedModel } from '@openai/agents/testing';
import { wrapAgentTools } from '../agents.js';
import { createIdempotency } from '../index.js';
import { CRASH_PROMPT, ticketArgs, ticketSystem } from './app.js';

const { CRASH_MODE, CRASH_DB, CRASH_EFFECTS } = process.env;
const die = () => process.kill(process.pid, 'SIGKILL');
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: (event) => {
    const tool = event.toolName === 'create_ticket';
    if (CRASH_MODE === 'after-persist' && tool && event.outcome === 'executed') die();
  },
});
const system = ticketSystem(CRASH_EFFECTS);
const execute = (args: { title: string; priority: 'low' | 'normal' | 'high' }) => {
  const result = system.create(args);
  if (CRASH_MODE === 'after-effect') die();
  return result;
};

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
