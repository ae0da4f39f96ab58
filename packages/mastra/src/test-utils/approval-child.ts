/**
 * One process of an app whose tool needs approval (Mastra memory and run snapshots on a LibSQL
 * file, the idempotency store on SQLite), driven by approval.test.ts. Prints one JSON line:
 * - `suspend`: one turn; the run stops for the approval (its run and call ids);
 * - `approve` / `decline`: this package's helpers (the decision stored, then Mastra resumes);
 * - `mastra-approve` / `mastra-decline`: Mastra's own `approveToolCallGenerate` / decline;
 * - `record-decline`: the rejection stored, the run not resumed (a crash in between);
 * - `status`: the stored approval of the suspended call;
 * - `tamper`: the run snapshot edited so that the suspended call is of other arguments.
 */
import { appendFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import {
  approveToolCallGenerate,
  declineToolCallGenerate,
  getToolCallApproval,
  idempotentTools,
  recordToolCallDecision,
} from '../index.js';
import { libsql, makeAgent, startModelServer } from './app.js';

const { MODE, DIR, RUN_ID = '', CALL_ID = '' } = process.env;
const carryOut = createTool({
  id: 'carry_out',
  description: "Carry out the user's request.",
  inputSchema: z.object({ request: z.string() }),
  requireApproval: true,
  execute: async ({ request }) => {
    appendFileSync(`${DIR}/effects`, `${request}\n`);
    return { done: request };
  },
});
const store = openSqliteStore(`${DIR}/idempotency.db`);
const tools = idempotentTools({ carry_out: carryOut }, { store });
const server = await startModelServer();
const storage = libsql(`${DIR}/mastra.db`);
const agent = makeAgent({ server, tools, storage });
const memory = { memory: { thread: 'chat-1', resource: 'user-1' } };
const target = { runId: RUN_ID, toolCallId: CALL_ID, ...memory };
type Out = Awaited<ReturnType<typeof agent.generate>>;
const reply = (out: Out) => ({
  text: out.text,
  finishReason: out.finishReason,
  results: out.toolResults.map((r) => r.payload.result),
});

async function main(): Promise<unknown> {
  switch (MODE) {
    case 'suspend': {
      const out = await agent.generate('Cancel my subscription.', memory);
      const payload = out.suspendPayload as { toolCallId?: string } | undefined;
      return { finishReason: out.finishReason, runId: out.runId, toolCallId: payload?.toolCallId };
    }
    case 'approve':
      return reply(await approveToolCallGenerate(agent, { ...target, by: 'alice@example.com' }));
    case 'mastra-approve':
      return reply(await agent.approveToolCallGenerate(target));
    case 'decline':
      return reply(
        await declineToolCallGenerate(agent, { ...target, by: 'bob@example.com', reason: 'No.' }),
      );
    case 'mastra-decline':
      return reply(await agent.declineToolCallGenerate(target));
    case 'record-decline':
      return {
        approval: await recordToolCallDecision(agent, {
          ...target,
          decision: 'rejected',
          by: 'bob@example.com',
          reason: 'No.',
        }),
      };
    case 'status':
      return { approval: await getToolCallApproval(agent, target) };
    case 'tamper': {
      // Both snapshots of the run (the loop and its execution workflow), every copy of the args.
      const workflows = await storage.getStore('workflows');
      let edited = 0;
      for (const workflowName of ['agentic-loop', 'executionWorkflow']) {
        const key = { workflowName, runId: RUN_ID };
        const text = JSON.stringify(await workflows?.loadWorkflowSnapshot(key));
        const other = text.replace(
          /(\\*)"request\1":\1"Cancel my subscription\./g,
          (_all, q: string) => {
            edited += 1;
            return `${q}"request${q}":${q}"Delete my account.`;
          },
        );
        await workflows?.persistWorkflowSnapshot({ ...key, snapshot: JSON.parse(other) });
      }
      return { edited };
    }
    default:
      throw new Error(`unknown MODE ${MODE}`);
  }
}

try {
  console.log(JSON.stringify(await main()));
} catch (error) {
  const { name, code, message } = error as { name?: string; code?: string; message?: string };
  console.log(JSON.stringify({ error: { name, code, message } }));
} finally {
  await server.close();
  store.close();
}
