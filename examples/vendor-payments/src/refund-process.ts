/**
 * One agent process running one `refund` tool call (SQLite store), waiting for a person's
 * approval when the refund needs one. It prints, one JSON line each, the approval it asked for,
 * the decision it saw, the idempotency events and its reply. Started by approval-story.ts;
 * `killAt` makes it SIGKILL itself at that step.
 */
import {
  createApprovals,
  createIdempotency,
  errorForModel,
  markReplayed,
  openSqliteStore,
} from '@idempotent-tools/store-sqlite';
import { type RefundArgs, refundTool, runRefund } from './refund.js';

/** Where a refund's agent may be killed. */
export type RefundStep = 'approval:requested' | 'approval:decided';

export interface RefundProcessInput {
  database: string;
  paycoUrl: string;
  turnId: string;
  args: RefundArgs;
  /** The approval the model's (resumed) call carries. */
  approvalKey?: string;
  killAt?: RefundStep;
  lease: number;
}

export type RefundLine =
  | { type: 'approval-requested'; key: string }
  | { type: 'decided'; status: string }
  | { type: 'event'; toolName: string; outcome: string }
  | { type: 'reply'; output: unknown };

const input = JSON.parse(process.argv[2] ?? '{}') as RefundProcessInput;
const write = (line: RefundLine) => process.stdout.write(`${JSON.stringify(line)}\n`);
const die = (at: RefundStep) => {
  if (at === input.killAt) process.kill(process.pid, 'SIGKILL');
};

const store = openSqliteStore(input.database);
const idempotency = createIdempotency({
  store,
  lease: input.lease,
  onEvent: (e) => write({ type: 'event', toolName: e.toolName, outcome: e.outcome }),
});
const approvals = createApprovals(idempotency);

let output: unknown;
try {
  const { value, replayed } = await runRefund(
    { idempotency, approvals },
    { toolName: 'refund', turnId: input.turnId, args: input.args },
    refundTool({ paycoUrl: input.paycoUrl }),
    {
      approvalKey: input.approvalKey,
      onApprovalRequested: (key) => {
        write({ type: 'approval-requested', key });
        die('approval:requested');
      },
      onDecided: (status) => {
        write({ type: 'decided', status });
        die('approval:decided');
      },
    },
  );
  output = markReplayed(value, replayed);
} catch (error) {
  output = errorForModel(error) ?? { error: String(error) };
}
write({ type: 'reply', output });
await store.close?.();
