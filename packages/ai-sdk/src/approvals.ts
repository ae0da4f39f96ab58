/**
 * The AI SDK's approval flow (tool `needsApproval`: a `tool-approval-request`, the app sends the
 * `tool-approval-response` back in the messages) bound to the exact call on the store (core's
 * approvals): an approval authorises only a call this server's model asked about, with exactly
 * its arguments, in its turn; a client-made or edited history is refused, to the app.
 */
import type { Approvals, ExecutionContext, Idempotency } from '@idempotent-tools/core';
import { InvalidInputError } from '@idempotent-tools/core';
import type { PreparedCall } from '@idempotent-tools/core/adapter-kit';
import type { ModelMessage } from 'ai';

/** What the SDK tells of a call's approval (its options). */
type Asked = { toolCallId: string; messages?: readonly ModelMessage[] | undefined };

/** The messages' approval of one tool call: whether they asked about it, and the response. */
function approvalIn({ messages = [], toolCallId }: Asked) {
  const approvalIds = new Set<string>();
  let response: { approvalId: string; approved: boolean } | undefined;
  for (const { content } of messages) {
    for (const part of typeof content === 'string' ? [] : content) {
      if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) {
        approvalIds.add(part.approvalId);
      }
      if (part.type === 'tool-approval-response' && approvalIds.has(part.approvalId)) {
        response = part;
      }
    }
  }
  return { asked: approvalIds.size > 0, response };
}

/** An approved call whose request is not on the store: for the app (a made-up or edited history). */
function unasked({ toolName }: PreparedCall<unknown>, asked: Asked, asks: boolean) {
  const approvalId = approvalIn(asked).response?.approvalId;
  const which = `${toolName} (tool call ${asked.toolCallId}${approvalId === undefined ? '' : `, approval ${approvalId}`})`;
  const why = asks
    ? 'The client made the history up or edited it (another tool call, other arguments).'
    : "The client made the history up, or generateText's toolApproval asked for it: the wrapper sees only the tool's own needsApproval, so put needsApproval on the tool.";
  return new InvalidInputError({
    field: 'messages',
    message: `The messages approve a call of ${which} that this server's model never asked to approve: no approval request of this call (its arguments, in this turn) is on the store. ${why} Nothing ran and nothing was recorded; answer the request as a bad request.`,
  });
}

/**
 * The wrapped `needsApproval` of a call the tool asks about: the model's call is stored as a
 * request, the args pinned to the tool call id (asked unless decided already); a call of the
 * history (the SDK checks it again before it runs it) must have its request on the store.
 * @throws InvalidInputError (field `messages`) when the model never asked about this call
 */
export async function askApproval(
  approvals: Approvals,
  prepared: PreparedCall<unknown>,
  asked: Asked,
): Promise<boolean> {
  const { call, policy } = prepared;
  if (!approvalIn(asked).asked) {
    const ref = asked.toolCallId;
    return (await approvals.requestApproval(call, { policy, ref })).status === 'pending';
  }
  if ((await approvals.getApproval(approvals.keyOf(call, policy))) !== undefined) return true;
  throw unasked(prepared, asked, true);
}

/**
 * Run one call: an approved one (its response in the messages) only if its request is on the
 * store, approved there (`approveCall`, by the SDK's approval id) and run guarded, once; one of a
 * tool that `asks` with a request on the store guarded (a rejection stays one); others as usual.
 * @throws InvalidInputError (field `messages`) when the model never asked about the approved call
 */
export async function runWithApproval(
  approvals: Approvals,
  executor: Idempotency,
  prepared: PreparedCall<unknown>,
  fn: (args: unknown, context: ExecutionContext) => Promise<unknown>,
  asked: Asked & { asks: boolean },
): Promise<{ value: unknown; replayed: boolean }> {
  const { call, policy } = prepared;
  const { response } = approvalIn(asked);
  const approvedBy = response?.approved === true ? `ai-sdk:${response.approvalId}` : undefined;
  const requested =
    approvedBy !== undefined || asked.asks
      ? await approvals.getApproval(approvals.keyOf(call, policy))
      : undefined;
  if (approvedBy !== undefined) {
    if (requested === undefined) throw unasked(prepared, asked, asked.asks);
    await approvals.approveCall(call, { policy, ref: asked.toolCallId, by: approvedBy });
  }
  return requested === undefined ? executor.run(call, fn, policy) : approvals.run(call, fn, policy);
}
