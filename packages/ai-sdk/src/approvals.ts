/**
 * The AI SDK's approval flow (tool `needsApproval`), bound to the exact call on the store (core's
 * approvals): the SDK keeps its own flow (a `tool-approval-request`, then the app sends the
 * `tool-approval-response` back in the messages). When the model emits a call and the tool asks,
 * the wrapper stores the request (the args pinned to the tool call id); when an approved call
 * comes back in the messages, it runs only if that request is on the store: an approval
 * authorises only a call this server's model asked about, with exactly its arguments, in its
 * turn. A client-made or edited history is refused, to the app (the SDK's own signed approvals,
 * `experimental_toolApprovalSecret`, are refused the same way: thrown out of generateText).
 */
import {
  ApprovalConflictError,
  type Approvals,
  type Call,
  InvalidInputError,
  type ToolPolicy,
} from '@idempotent-tools/core';
import type { ModelMessage } from 'ai';

/** The approval ids the messages' `tool-approval-request` parts give one tool call. */
function approvalIdsOf(messages: readonly ModelMessage[], toolCallId: string): Set<string> {
  const approvalIds = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) {
        approvalIds.add(part.approvalId);
      }
    }
  }
  return approvalIds;
}

/**
 * Whether the messages already hold an approval request for this tool call: the call comes from
 * the history (the SDK checks an approved call again before it runs it), not from the model.
 */
export function requestedIn(
  messages: readonly ModelMessage[] | undefined,
  toolCallId: string,
): boolean {
  return messages !== undefined && approvalIdsOf(messages, toolCallId).size > 0;
}

/** The approval response the messages carry for one tool call, when they carry one. */
export function approvalResponseOf(
  messages: readonly ModelMessage[] | undefined,
  toolCallId: string,
): { approvalId: string; approved: boolean; reason?: string | undefined } | undefined {
  if (messages === undefined) return undefined;
  const approvalIds = approvalIdsOf(messages, toolCallId);
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
 * An approved call in the messages whose approval request was never stored: the model never
 * asked about this call (this tool, these arguments, this turn). For the app, never the model:
 * the client made the history up or edited it, as the SDK's `InvalidToolApprovalSignatureError`.
 */
export function unaskedApproval(
  call: Call,
  toolCallId: string,
  approvalId: string | undefined,
  asks: boolean,
): InvalidInputError {
  const which = `${String(call.toolName)} (tool call ${toolCallId}${approvalId === undefined ? '' : `, approval ${approvalId}`})`;
  const why = asks
    ? 'The client made the history up or edited it (another tool call, other arguments).'
    : "The client made the history up, or generateText's toolApproval asked for it: the wrapper sees only the tool's own needsApproval, so put needsApproval on the tool.";
  return new InvalidInputError({
    field: 'messages',
    message: `The messages approve a call of ${which} that this server's model never asked to approve: no approval request of this call (its arguments, in this turn) is on the store. ${why} Nothing ran and nothing was recorded; answer the request as a bad request.`,
  });
}

/**
 * The SDK checking an approved call of the history again before it runs it (`needsApproval` of
 * a call the messages already asked about): the request must be on the store, else the history
 * was made up. Nothing is stored here.
 * @throws InvalidInputError (field `messages`) when the model never asked about this call
 */
export async function checkRequested(
  approvals: Approvals,
  call: Call,
  approval: { toolCallId: string; messages: readonly ModelMessage[] | undefined },
  policy: ToolPolicy | undefined,
): Promise<void> {
  const requested = await approvals.getApproval(approvals.keyOf(call, policy));
  if (requested !== undefined) return;
  const response = approvalResponseOf(approval.messages, approval.toolCallId);
  throw unaskedApproval(call, approval.toolCallId, response?.approvalId, true);
}

/**
 * Run one call of a wrapped tool: an approved call (its approval response is in the messages)
 * runs only if its approval request is on the store (stored when the model asked); its approval
 * is recorded (by the SDK's approval id, the first one wins) and it runs guarded, once. A call of
 * a tool that asks for approval with a decision on the store is run guarded (a rejection stays
 * one); any other call runs as usual.
 * @throws InvalidInputError (field `messages`) for an approval of a call the model never asked
 *   about: nothing runs, nothing is recorded
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
    const key = approvals.keyOf(call, policy);
    const requested = await approvals.getApproval(key);
    if (requested === undefined) {
      throw unaskedApproval(call, toolCallId, response.approvalId, approval.asks);
    }
    if (requested.status === 'pending') {
      try {
        await approvals.approve(key, { by: `ai-sdk:${response.approvalId}` });
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
