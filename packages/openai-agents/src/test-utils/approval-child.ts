/**
 * Another process resumes an interrupted run: it loads the saved RunState, approves (or, with
 * `APPROVAL_DECISION=reject`, rejects) the pending calls and runs the agent to the end. Driven
 * by approval.test.ts (`APPROVAL_AGENT`: `refund`, the default, or `charge`). A refusal thrown
 * out of the run exits with code 1.
 */
import { readFileSync } from 'node:fs';
import { openSqliteStore } from '@idempotent-tools/store-sqlite';
import { RunState, run, setTracingDisabled } from '@openai/agents';
import { createIdempotency } from '../index.js';
import { chargeAgent, refundAgent } from './app.js';

const {
  APPROVAL_DB,
  APPROVAL_STATE,
  APPROVAL_EFFECTS,
  APPROVAL_BASE_URL,
  APPROVAL_LOOKUPS,
  APPROVAL_AGENT,
  APPROVAL_DECISION,
} = process.env;
setTracingDisabled(true);
const store = openSqliteStore(APPROVAL_DB as string);
const idempotency = createIdempotency({ store });
const agent =
  APPROVAL_AGENT === 'charge'
    ? chargeAgent(idempotency, APPROVAL_BASE_URL as string, APPROVAL_EFFECTS as string)
    : refundAgent(
        idempotency,
        APPROVAL_BASE_URL as string,
        APPROVAL_EFFECTS as string,
        APPROVAL_LOOKUPS,
      );
try {
  const state = await RunState.fromString(agent, readFileSync(APPROVAL_STATE as string, 'utf8'));
  for (const interruption of state.getInterruptions()) {
    if (APPROVAL_DECISION === 'reject') state.reject(interruption);
    else state.approve(interruption);
  }
  const result = await run(agent, state);
  console.log(JSON.stringify({ finalOutput: result.finalOutput }));
} finally {
  store.close();
}
