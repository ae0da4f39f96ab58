/**
 * The executor (design section 6, docs/design.md). Its parts live in `executor/`: the public
 * types (types.ts), policies (policy.ts), one call's state (call-run.ts), the claim loop
 * (machine.ts), running the tool (run-tool.ts) under its lease (lease.ts) in its execution
 * context (context.ts), waiting for a duplicate (wait.ts), stale attempts (stale.ts), replay
 * (replay.ts), fail-open (fail-open.ts). The vendor calls (design section 8) live in `vendor-calls/`,
 * which depends on the executor and not the reverse: this file binds the two.
 */
import { createExecutor } from './executor/create.js';
import type { Idempotency, IdempotencyOptions } from './executor/types.js';
import { createVendorCall } from './vendor-calls/ledger.js';
import { watchRequests } from './vendor-calls/sent-requests.js';

export * from './executor/types.js';

/**
 * The executor (design section 6, docs/design.md): one state machine for every tool and vendor
 * call.
 *
 * ```ts
 * const idempotency = createIdempotency({ store: createMemoryStore() });
 * const { value, replayed } = await idempotency.run(
 *   { toolName: 'charge', turnId, args },
 *   (args, ctx) => payments.charge(args, { idempotencyKey: ctx.key }),
 * );
 * ```
 */
export function createIdempotency(options: IdempotencyOptions): Idempotency {
  const executor = createExecutor(options);
  // Requests a tool sends past the vendor helpers count as its effects (`onToolError: 'auto'`).
  watchRequests();
  return { ...executor, vendorCall: createVendorCall(executor.run) };
}
