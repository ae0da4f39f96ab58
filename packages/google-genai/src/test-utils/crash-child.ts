/**
 * A process that runs one turn (automatic function calling, SQLite store) and SIGKILLs itself
 * after the side effect (before its outcome is stored) or after the outcome is stored (before
 * replying to the model). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { ticketCrash } from '@idempotent-tools/testing';
import { createIdempotency } from '../index.js';
import { CRASH_PROMPT, client, runTurn } from './app.js';
import { ticketFunctions } from './drivers.js';

const { CRASH_MODE, CRASH_DB, CRASH_EFFECTS, CRASH_BASE_URL } = process.env;
const crash = ticketCrash({ mode: CRASH_MODE, effectsFile: CRASH_EFFECTS });
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: crash.onEvent,
});
const { system } = crash;
const fns = await ticketFunctions(idempotency, system, 'functions');
await runTurn(client(CRASH_BASE_URL as string), fns, 'afc', {
  history: [],
  text: CRASH_PROMPT,
  system: 'You open tickets.',
  conversationId: 'chat-1',
});
console.log('the process was not killed');
