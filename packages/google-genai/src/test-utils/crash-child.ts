/**
 * A process that runs one turn (automatic function calling, SQLite store) and SIGKILLs itself
 * after the side effect (before its outcome is stored) or after the outcome is stored (before
 * replying to the model). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createIdempotency } from '../index.js';
import { CRASH_PROMPT, client, runTurn, ticketSystem } from './app.js';
import { ticketFunctions } from './drivers.js';

const { CRASH_MODE, CRASH_DB, CRASH_EFFECTS, CRASH_BASE_URL } = process.env;
const die = () => process.kill(process.pid, 'SIGKILL');
const idempotency = createIdempotency({
  store: openSqliteStore(CRASH_DB as string),
  lease: 1_000,
  onEvent: (event) => {
    const tool = event.toolName === 'create_ticket';
    if (CRASH_MODE === 'after-persist' && tool && event.outcome === 'executed') die();
  },
});
const inner = ticketSystem(CRASH_EFFECTS);
const system = {
  ...inner,
  create(args: { title: string; priority?: string }) {
    const result = inner.create(args);
    if (CRASH_MODE === 'after-effect') die();
    return result;
  },
};
const fns = await ticketFunctions(idempotency, system, 'functions');
await runTurn(client(CRASH_BASE_URL as string), fns, 'afc', {
  history: [],
  text: CRASH_PROMPT,
  system: 'You open tickets.',
  conversationId: 'chat-1',
});
console.log('the process was not killed');
