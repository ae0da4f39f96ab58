/**
 * How Mastra asks the human, bound to the exact call by core's approvals. Mastra gates an
 * approval-requiring call before its `execute` (`requireApproval`: the run suspends; the app
 * resumes it with `approveToolCall` / `declineToolCall`) and gives the gate no tool-call id, so:
 * - the wrapper records each call the model emits (`recordAsked`, see idempotent-tools.ts), and a
 *   call that reaches the wrapped `execute` through the gate (`passedApproval`) is approved there
 *   (`approveCall` with `asked`): only a call the model asked for, with exactly its arguments (a
 *   run snapshot edited to other arguments is refused, DriftError; a call rejected on the store
 *   first stays rejected);
 * - Mastra never calls `execute` for a declined call, so a decline is stored by the helpers here
 *   (`declineToolCall(agent, ...)`), which find the suspended call (`listSuspendedRuns`) and
 *   identify it as the wrapped `execute` will.
 */
import {
  type Approval,
  type Approvals,
  ConfigurationError,
  InvalidInputError,
} from '@idempotent-tools/core';
import type { Agent } from '@mastra/core/agent';
import type { RequestContext } from '@mastra/core/request-context';
import type { FullOutput, MastraModelOutput } from '@mastra/core/stream';

/** Where a wrapped tool keeps what the helpers need (a `Symbol.for`: works across installs). */
export const TOOL_APPROVAL = Symbol.for('idempotent-tools.mastra.approval');

/** What a wrapped tool exposes to the helpers: the approval of one of its calls. */
export interface ToolApproval {
  approvals: Approvals;
  /** The approval of this call (identified as `execute` identifies it), asked for under `ref`. */
  request(args: unknown, context: Record<string, unknown>, ref: string): Promise<Approval>;
}

const GLOBAL = '__mastra_requireToolApproval';
type Gate = (input: unknown, context: object) => unknown;

/**
 * Whether Mastra's approval gate stood before this call (Mastra evaluates it the same way): the
 * tool's `requireApproval` (a function is asked again, with the same input and context), else
 * the run's `requireToolApproval`. Only for a call of an agent run (it has a tool-call id).
 */
export async function passedApproval(
  requireApproval: unknown,
  toolName: string,
  args: unknown,
  context: Record<string, unknown> | undefined,
): Promise<boolean> {
  const agent = context?.agent as { toolCallId?: unknown } | undefined;
  if (typeof agent?.toolCallId !== 'string' || agent.toolCallId === '') return false;
  const requestContext = context?.requestContext as RequestContext | undefined;
  const entries =
    typeof requestContext?.entries === 'function' ? [...requestContext.entries()] : [];
  const gateContext = {
    requestContext: Object.fromEntries(entries.filter(([key]) => key !== GLOBAL)),
    ...(context?.workspace === undefined ? {} : { workspace: context.workspace }),
  };
  const ask = async (gate: () => unknown) => {
    try {
      return Boolean(await gate());
    } catch {
      return true; // Mastra asks for approval when its policy throws
    }
  };
  if (typeof requireApproval === 'function') {
    return ask(() => (requireApproval as Gate)(args, gateContext));
  }
  if (requireApproval === true) return true;
  const global = requestContext?.get?.(GLOBAL) as unknown;
  if (typeof global === 'function') {
    return ask(() => (global as Gate)({ toolName, args, ...gateContext }, undefined as never));
  }
  return global === true;
}

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
  if (typeof runId !== 'string' || runId === '') {
    throw new InvalidInputError({
      field: 'runId',
      message: 'Pass the runId of the suspended run (output.runId, or agent.listSuspendedRuns()).',
    });
  }
  const { runs } = await agent.listSuspendedRuns();
  const run = runs.find((r) => r.runId === runId);
  const waiting = (run?.toolCalls ?? []).filter(
    (c) => c.requiresApproval && (toolCallId === undefined || c.toolCallId === toolCallId),
  );
  const call = waiting[0];
  if (call === undefined || waiting.length > 1 || typeof call.toolCallId !== 'string') {
    throw new InvalidInputError({
      field: 'toolCallId',
      message:
        waiting.length > 1
          ? `The run ${runId} waits for the approval of ${waiting.length} tool calls: pass the toolCallId of one.`
          : `No tool call${toolCallId === undefined ? '' : ` ${toolCallId}`} of the run ${runId} is waiting for an approval (it was decided already, the run finished, or it is another agent's). Nothing was decided.`,
    });
  }
  const tools = (await agent.listTools(requestContext ? { requestContext } : {})) as Record<
    string,
    { id?: unknown; [TOOL_APPROVAL]?: ToolApproval }
  >;
  const tool =
    tools[call.toolName ?? ''] ?? Object.values(tools).find((t) => t?.id === call.toolName);
  const handle = tool?.[TOOL_APPROVAL];
  if (handle === undefined) {
    throw new ConfigurationError({
      option: 'tools',
      message: `The tool ${call.toolName} of the agent ${agent.id} is not wrapped with idempotentTools (or it is excluded / unsafe): its approval is not stored. Wrap the agent's tools: new Agent({ tools: idempotentTools({ ... }, { store }) }).`,
    });
  }
  const memory = await agent.getMemory(requestContext ? { requestContext } : {});
  // The context the wrapped execute gets when the run resumes (see idempotent-tools.ts).
  const context: Record<string, unknown> = {
    requestContext,
    memory,
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
  const { by, reason } = decision;
  return decision.decision === 'approved'
    ? handle.approvals.approve(approval.key, { by })
    : handle.approvals.reject(approval.key, { by, reason });
}

/** Mastra's methods that resume a suspended call. */
type Resumer =
  | 'approveToolCall'
  | 'approveToolCallGenerate'
  | 'declineToolCall'
  | 'declineToolCallGenerate';
type Helper<M extends Resumer> = Omit<
  Parameters<AnyAgent[M]>[0],
  'runId' | 'toolCallId' | 'reason'
> &
  ToolCallDecider;

/** What each resumes the run with (its output of no structured `OUTPUT`, as Mastra's default). */
type Resumed = {
  approveToolCall: MastraModelOutput<undefined>;
  approveToolCallGenerate: FullOutput<undefined>;
  declineToolCall: MastraModelOutput<undefined>;
  declineToolCallGenerate: FullOutput<undefined>;
};

/** Mastra's `method`, with the decision stored first (`recordToolCallDecision`). */
function storedFirst<M extends Resumer>(method: M, decision: 'approved' | 'rejected') {
  return async (agent: AnyAgent, options: Helper<M>): Promise<Resumed[M]> => {
    await recordToolCallDecision(agent, { ...options, decision });
    const { by: _by, reason, ...rest } = options;
    const given = decision === 'rejected' && reason !== undefined ? { ...rest, reason } : rest;
    return (agent[method] as (options: unknown) => never).call(agent, given);
  };
}

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
