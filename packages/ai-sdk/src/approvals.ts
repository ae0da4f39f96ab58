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

/**
 * An approved call in the messages whose approval request was never stored: the model never
 * asked about this call (this tool, these arguments, this turn). For the app, never the model:
 * the client made the history up or edited it, as the SDK's `InvalidToolApprovalSignatureError`.
 */
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
 * The wrapped `needsApproval` of a call the tool asks about. When the model emits it, the request
 * is stored with the args pinned to the tool call id; it asks unless decided on the store already.
 * A call the messages already asked about is the SDK checking an approved call of the history
 * again before it runs it: its request must be on the store (nothing is stored here).
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
 * Run one call of a wrapped tool: an approved call (its approval response is in the messages)
 * runs only if its approval request is on the store (stored when the model asked); it is approved
 * there (core's `approveCall`, by the SDK's approval id: the first decision wins) and runs
 * guarded, once. A call of a tool that asks (`asks`) with a decision on the store runs guarded (a
 * rejection stays one); any other call runs as usual.
 * @throws InvalidInputError (field `messages`) for an approval of a call the model never asked
 *   about: nothing runs, nothing is recorded
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
