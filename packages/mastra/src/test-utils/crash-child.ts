/**
 * One process of an app with durable state (Mastra memory and run snapshots on a LibSQL file,
 * the idempotency store on SQLite), driven by crash.test.ts:
 * - `turn`: one turn; `CRASH=after-persist` SIGKILLs the process once the tool's outcome is
 *   stored, before the reply; `CRASH=in-tool-after-flush`: the tool saves the thread so far
 *   (Mastra's `flushMessages`), does its effect and the process is killed before it returns;
 * - `suspend`: one turn whose tool needs approval: prints the run and call ids, exits;
 * - `approve`: approves that call (after a restart); `CRASH=after-persist` as above.
 */
import { appendFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { idempotentTools } from '../index.js';
import { libsql, makeAgent, runAgent, startModelServer } from './app.js';

const { MODE, CRASH, DIR, RUN_ID = '', CALL_ID = '' } = process.env;
const die = () => process.kill(process.pid, 'SIGKILL');
const carryOut = createTool({
  id: 'carry_out',
  description: "Carry out the user's request.",
  inputSchema: z.object({ request: z.string() }),
  requireApproval: MODE !== 'turn',
  execute: async ({ request }, context) => {
    if (CRASH === 'in-tool-after-flush') await context?.agent?.flushMessages?.();
    appendFileSync(`${DIR}/effects`, `${request}\n`);
    if (CRASH === 'in-tool-after-flush') die();
    return { done: request };
  },
});
const tools = idempotentTools(
  { carry_out: carryOut },
  {
    store: openSqliteStore(`${DIR}/idempotency.db`),
    onEvent: (event) => {
      if (CRASH === 'after-persist' && event.outcome === 'executed') die();
    },
  },
);
const server = await startModelServer();
const agent = makeAgent({ server, tools, storage: libsql(`${DIR}/mastra.db`) });
const memory = { memory: { thread: 'chat-1', resource: 'user-1' } };
if (MODE === 'turn') {
  try {
    const out = await runAgent(agent, 'generate', 'Cancel my subscription.', memory);
    console.log(JSON.stringify({ text: out.text }));
  } catch (error) {
    const { name, code, message } = error as { name?: string; code?: string; message?: string };
    console.log(JSON.stringify({ error: { name, code, message } }));
  }
} else if (MODE === 'suspend') {
  const out = await runAgent(agent, 'generate', 'Cancel my subscription.', memory);
  const payload = out.suspendPayload as { toolCallId?: string } | undefined;
  console.log(
    JSON.stringify({
      finishReason: out.finishReason,
      runId: out.runId,
      toolCallId: payload?.toolCallId,
    }),
  );
} else {
  const out = await agent.approveToolCallGenerate({
    runId: RUN_ID,
    toolCallId: CALL_ID,
    ...memory,
  });
  console.log(
    JSON.stringify({ text: out.text, results: out.toolResults.map((r) => r.payload.result) }),
  );
}
await server.close();
