/**
 * A process that runs one turn and SIGKILLs itself after the side effect (before its outcome is
 * stored) or after the outcome is stored (before replying). Driven by crash.test.ts.
 */
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createIdempotency, createToolDispatcher } from '../index.js';
import { CRASH_PROMPT, chatTurn, client, ticketArgs, ticketSystem } from './app.js';

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
const system = ticketSystem(CRASH_EFFECTS);
const execute = (args: { title: string; priority: 'low' | 'normal' | 'high' }) => {
  const result = system.create(args);
  if (CRASH_MODE === 'after-effect') die();
  return result;
};

const tools = createToolDispatcher(idempotency, {
  create_ticket: { schema: ticketArgs, execute },
});
await chatTurn(client(CRASH_BASE_URL as string), tools, [{ role: 'user', content: CRASH_PROMPT }]);
console.log('the process was not killed');
