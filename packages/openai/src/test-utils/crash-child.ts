/**
 * A process that runs one turn and SIGKILLs itself after the side effect (before its outcome is
 * stored) or after the outcome is stored (before replying). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { ticketCrash } from '@idempotent-tools/testing';
import { createIdempotency, createToolDispatcher } from '../index.js';
import { CRASH_PROMPT, chatTurn, client, ticketArgs } from './app.js';

const { CRASH_MODE, CRASH_DB, CRASH_EFFECTS, CRASH_BASE_URL } = process.env;
const crash = ticketCrash({ mode: CRASH_MODE, effectsFile: CRASH_EFFECTS });
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: crash.onEvent,
});
const execute = (args: { title: string; priority: 'low' | 'normal' | 'high' }) =>
  crash.system.create(args);

const tools = createToolDispatcher(idempotency, {
  create_ticket: { schema: ticketArgs, execute },
});
await chatTurn(client(CRASH_BASE_URL as string), tools, [{ role: 'user', content: CRASH_PROMPT }]);
console.log('the process was not killed');
