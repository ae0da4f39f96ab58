/**
 * A process that runs one turn and SIGKILLs itself after the side effect (before its outcome is
 * stored) or after the outcome is stored (before replying). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { ticketCrash } from '@idempotent-tools/testing';
import { createIdempotency, createToolDispatcher } from '../index.js';
import {
  CRASH_PROMPT,
  client,
  dispatchTurn,
  runnerTurn,
  ticketArgs,
  ticketSystem,
  ticketTool,
} from './app.js';

const { CRASH_SURFACE, CRASH_MODE, CRASH_DB, CRASH_EFFECTS, CRASH_BASE_URL } = process.env;
const crash = ticketCrash({ mode: CRASH_MODE, effectsFile: CRASH_EFFECTS });
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: crash.onEvent,
});
const system = ticketSystem(CRASH_EFFECTS);
const { afterEffect } = crash;
const anthropic = client(CRASH_BASE_URL as string);
const history = [{ role: 'user' as const, content: CRASH_PROMPT }];

if (CRASH_SURFACE === 'dispatcher') {
  const tools = createToolDispatcher(idempotency, {
    create_ticket: {
      schema: ticketArgs,
      execute: (args: { title: string; priority: 'low' | 'normal' | 'high' }) => {
        const out = system.create(args);
        afterEffect();
        return out;
      },
    },
  });
  await dispatchTurn(anthropic, tools, history, { conversationId: 'chat-1' });
} else {
  await runnerTurn(anthropic, [ticketTool(system, afterEffect)], history, {
    idempotency,
    conversationId: 'chat-1',
  });
}
console.log('the process was not killed');
