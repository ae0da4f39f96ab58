/**
 * A process that runs one turn of the chat workflow on LangGraph's SqliteSaver + the SQLite
 * idempotency store, then exits (0, or 2 with the error's name and message on stderr).
 * Env: CHECKPOINT_FILE, SQLITE_FILE, EFFECTS_FILE, THREAD_ID, INPUT (JSON), TURN_ID (optional).
 */
import { createIdempotency } from '@idempotent-tools/core';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { openSqliteSaver } from './node-sqlite-saver.js';
import { chatWorkflow } from './task-chat.js';

const env = process.env;
const store = openSqliteStore(env.SQLITE_FILE as string);
const checkpointer = openSqliteSaver(env.CHECKPOINT_FILE as string);
const workflow = chatWorkflow({
  checkpointer,
  idempotency: createIdempotency({ store }),
  effectsFile: env.EFFECTS_FILE as string,
});
const configurable: Record<string, string> = { thread_id: env.THREAD_ID as string };
if (env.TURN_ID) configurable.turn_id = env.TURN_ID;
try {
  // `sync`: every checkpoint is written before the run goes on (and before this process exits).
  await workflow.invoke(JSON.parse(env.INPUT as string), { configurable, durability: 'sync' });
  process.exitCode = 0;
} catch (error) {
  process.stderr.write(
    JSON.stringify({
      name: (error as Error).name,
      code: (error as { code?: string }).code,
      option: (error as { option?: string }).option,
      message: (error as Error).message,
    }),
  );
  process.exitCode = 2;
} finally {
  store.close();
  checkpointer.close();
}
