/**
 * Another process resumes an interrupted run: it loads the saved RunState, approves the pending
 * call and runs the agent to the end. Driven by approval.test.ts.
 */
import { readFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { RunState, run, setTracingDisabled } from '@openai/agents';
import { createIdempotency } from '../index.js';
import { refundAgent } from './app.js';

const { APPROVAL_DB, APPROVAL_STATE, APPROVAL_EFFECTS, APPROVAL_BASE_URL, APPROVAL_LOOKUPS } =
  process.env;
setTracingDisabled(true);
const store = openSqliteStore(APPROVAL_DB as string);
const agent = refundAgent(
  createIdempotency({ store }),
  APPROVAL_BASE_URL as string,
  APPROVAL_EFFECTS as string,
  APPROVAL_LOOKUPS,
);
const state = await RunState.fromString(agent, readFileSync(APPROVAL_STATE as string, 'utf8'));
for (const interruption of state.getInterruptions()) state.approve(interruption);
const result = await run(agent, state);
store.close();
console.log(JSON.stringify({ finalOutput: result.finalOutput }));
