/**
 * The AI SDK's approval flow (tool `needsApproval`, or `toolApproval` of generateText /
 * streamText), bound to the exact call on the store (core's approvals): the SDK keeps its own
 * flow (a `tool-approval-request`, then the app sends the `tool-approval-response` back in the
 * messages); the wrapper pins the args to the tool call id when the SDK asks, records the
 * approval when the approved call comes back, and runs it through the guarded executor, so the
 * call runs once from any process and an approval never runs other arguments.
 */
import {
  ApprovalConflictError,
  type Approvals,
  type Call,
  type ToolPolicy,
} from '@idempotent-tools/core';
import type { ModelMessage } from 'ai';

/** The approval response the messages carry for one tool call, when they carry one. */
export function approvalResponseOf(
  messages: readonly ModelMessage[] | undefined,
  toolCallId: string,
): { approvalId: string; approved: boolean; reason?: string | undefined } | undefined {
  if (messages === undefined) return undefined;
  const approvalIds = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) {
        approvalIds.add(part.approvalId);
      }
    }
  }
  let found: { approvalId: string; approved: boolean; reason?: string | undefined } | undefined;
  for (const message of messages) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-approval-response' && approvalIds.has(part.approvalId)) {
        found = { approvalId: part.approvalId, approved: part.approved, reason: part.reason };
      }
    }
  }
  return found;
}

/**
 * Run one call of a wrapped tool: an approved call (its approval response is in the messages)
 * is recorded as approved, bound to its args (the args the SDK asked about, pinned to the tool
 * call id), and run guarded; a call of a tool that asks for approval with a decision on the
 * store is run guarded (a rejection stays one); any other call runs as usual.
 */
export async function runWithApproval<R>(
  approvals: Approvals,
  call: Call,
  approval: {
    asks: boolean;
    toolCallId: string;
    messages: readonly ModelMessage[] | undefined;
    policy: ToolPolicy | undefined;
  },
  guarded: () => Promise<R>,
  plain: () => Promise<R>,
): Promise<R> {
  const { policy, toolCallId } = approval;
  const response = approvalResponseOf(approval.messages, toolCallId);
  if (response?.approved === true) {
    const requested = await approvals.requestApproval(call, { policy, ref: toolCallId });
    if (requested.status === 'pending') {
      try {
        await approvals.approve(requested.key, { by: `ai-sdk:${response.approvalId}` });
      } catch (error) {
        // Decided the other way first (a stored rejection): the guarded run says so.
        if (!ApprovalConflictError.isInstance(error)) throw error;
      }
    }
    return guarded();
  }
  if (approval.asks && (await approvals.getApproval(approvals.keyOf(call, policy))) !== undefined) {
    return guarded();
  }
  return plain();
}
