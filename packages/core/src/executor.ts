/**
 * The executor (design section 6, docs/design.md). Its parts live in `executor/`: the public
 * types (types.ts), policies (policy.ts), one call's state (call-run.ts), the claim loop
 * (machine.ts), running the tool (run-tool.ts) under its lease (lease.ts), waiting for a
 * duplicate (wait.ts), stale attempts (stale.ts), replay (replay.ts), fail-open (fail-open.ts).
 */
export { createIdempotency } from './executor/create.js';
export * from './executor/types.js';
