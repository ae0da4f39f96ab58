/**
 * The approval contract (docs/design.md, "Turn identity", approvals) as the cases of
 * @idempotent-tools/testing, through Mastra's Agent with `requireApproval` (Memory and run
 * snapshots on LibSQL): resumed with this package's helpers, and with Mastra's own
 * `approveToolCallGenerate` / `declineToolCallGenerate`.
 */
import { runApprovalCases } from '@idempotent-tools/testing';
import { describe, expect, test } from 'vitest';
import { requireApprovalDriver } from './test-utils/drivers.js';

for (const resumer of ['helpers', 'mastra'] as const) {
  runApprovalCases({
    name: `Mastra requireApproval, resumed with ${resumer === 'helpers' ? "this package's helpers" : "Mastra's own methods"}`,
    describe,
    test,
    expect,
    createDriver: requireApprovalDriver(resumer),
    supports: ['reject', 'approveEdited', 'approveForOther', 'forge'],
  });
}
