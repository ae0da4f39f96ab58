/**
 * How Mastra asks the human, bound to the exact call by the kit's gated calls (`createGatedCalls`):
 * Mastra's gate (`requireApproval`) stands before `execute` and gives it no tool-call id; Mastra
 * never calls `execute` for a declined call, so the helpers here find the suspended call
 * (`listSuspendedRuns`), identify it as the wrapped `execute` will, and store the decision first.
 */
import { type Approval, ConfigurationError } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import type { Agent } from '@mastra/core/agent';
import type { RequestContext } from '@mastra/core/request-context';
import type { FullOutput, MastraModelOutput } from '@mastra/core/stream';

/** An agent of `@mastra/core` (what the helpers use of it). */
// biome-ignore lint/suspicious/noExplicitAny: an agent of any tools and output
type AnyAgent = Agent<any, any, any, any>;

/** Which suspended call: the run, and the call when the run waits on more than one. */
export interface SuspendedToolCall {
  /** The suspended run (`output.runId`, or `listSuspendedRuns`). */
  runId: string;
  /** The call (`output.suspendPayload.toolCallId`). @default the run's only call awaiting approval */
  toolCallId?: string | undefined;
  /** The run's request context, when the tools' options read it. @default a new one */
  requestContext?: RequestContext | undefined;
}

/** A decision on a suspended call: who made it, and why. */
export interface ToolCallDecider extends SuspendedToolCall {
  /** Who decides (a user id, an email): stored with the decision. */
  by: string;
  /** Why (a decline's reason: Mastra shows it to the model too). @default undefined */
  reason?: string | undefined;
}

async function suspendedCall(agent: AnyAgent, target: SuspendedToolCall) {
  const { runId, toolCallId, requestContext } = target ?? ({} as SuspendedToolCall);
  const find = async (id: string) =>
    (await agent.listSuspendedRuns()).runs.find((r) => r.runId === id);
  const { run, call } = await kit.waitingCall(runId, find, toolCallId);
  const given = requestContext ? { requestContext } : {};
  const tools = (await agent.listTools(given)) as Record<string, { id?: unknown }>;
  const tool =
    tools[call.toolName ?? ''] ?? Object.values(tools).find((t) => t?.id === call.toolName);
  const handle = kit.gatedCallOf(tool);
  if (handle === undefined) {
    throw new ConfigurationError({
      option: 'tools',
      message: `The tool ${call.toolName} of the agent ${agent.id} is not wrapped with idempotentTools (or it is excluded / unsafe): its approval is not stored. Wrap the agent's tools: new Agent({ tools: idempotentTools({ ... }, { store }) }).`,
    });
  }
  // The context the wrapped execute gets when the run resumes (see idempotent-tools.ts).
  const context: Record<string, unknown> = {
    requestContext,
    memory: await agent.getMemory(given),
    runId,
    agent: {
      agentId: agent.id,
      toolCallId: call.toolCallId,
      threadId: run?.threadId,
      resourceId: run?.resourceId,
      messages: [],
    },
  };
  return { approval: await handle.request(call.args, context, call.toolCallId), handle };
}

/**
 * The stored approval of a suspended call (its status, who decided, why), e.g. to decline a call
 * that was rejected before without asking again. Asks for it (`pending`) when none was asked yet.
 */
export async function getToolCallApproval(
  agent: AnyAgent,
  target: SuspendedToolCall,
): Promise<Approval> {
  return (await suspendedCall(agent, target)).approval;
}

/**
 * Store a decision on a suspended call without resuming the run (you resume it your way:
 * Mastra's server routes, `sendToolApproval`, ...). The first decision wins: the same one sent
 * again returns it, the other one throws `ApprovalConflictError`.
 */
export async function recordToolCallDecision(
  agent: AnyAgent,
  decision: ToolCallDecider & { decision: 'approved' | 'rejected' },
): Promise<Approval> {
  const { approval, handle } = await suspendedCall(agent, decision);
  return handle.decide(approval, decision);
}

/**
 * Mastra's methods that resume a suspended call, and what each resumes the run with (its output
 * of no structured `OUTPUT`, as Mastra's default).
 */
type Resumed = {
  approveToolCall: MastraModelOutput<undefined>;
  approveToolCallGenerate: FullOutput<undefined>;
  declineToolCall: MastraModelOutput<undefined>;
  declineToolCallGenerate: FullOutput<undefined>;
};
type Resumer = keyof Resumed;
type Helper<M extends Resumer> = Omit<
  Parameters<AnyAgent[M]>[0],
  'runId' | 'toolCallId' | 'reason'
> &
  ToolCallDecider;

/** Mastra's `method`, with the decision stored first (`recordToolCallDecision`). */
const storedFirst = <M extends Resumer>(method: M, decision: 'approved' | 'rejected') =>
  kit.decidedFirst(decision, recordToolCallDecision, (agent: AnyAgent, given) =>
    (agent[method] as (options: unknown) => never).call(agent, given),
  ) as (agent: AnyAgent, options: Helper<M>) => Promise<Resumed[M]>;

/**
 * `agent.approveToolCall`, with the approval stored first (who approved, bound to the call's
 * args): a call rejected on the store first is refused (`ApprovalConflictError`) and nothing runs.
 */
export const approveToolCall = storedFirst('approveToolCall', 'approved');

/** `agent.approveToolCallGenerate`, with the approval stored first (see `approveToolCall`). */
export const approveToolCallGenerate = storedFirst('approveToolCallGenerate', 'approved');

/**
 * `agent.declineToolCall`, with the rejection stored first (Mastra never calls `execute` for a
 * declined call): the call stays rejected, an approval of it delivered later runs nothing.
 */
export const declineToolCall = storedFirst('declineToolCall', 'rejected');

/** `agent.declineToolCallGenerate`, with the rejection stored first (see `declineToolCall`). */
export const declineToolCallGenerate = storedFirst('declineToolCallGenerate', 'rejected');
