/**
 * Mastra `requireApproval` bound to the exact call. Mastra gates an approval-requiring call before
 * its `execute` and gives the `requireApproval` function no tool-call id, so:
 * - a call that reaches the wrapped `execute` through the approval gate is pinned there: its
 *   approval is stored under the call's key, pinned to its `toolCallId` (an approval delivered
 *   again is one approval; a run snapshot edited to other arguments is refused, DriftError; a call
 *   rejected on the store first stays rejected);
 * - Mastra never calls `execute` for a declined call, so a decline is stored by the helpers here
 *   (`declineToolCall(agent, ...)`), which find the suspended call (`listSuspendedRuns`) and
 *   identify it as the wrapped `execute` will.
 */
import {
  type Approval,
  ApprovalConflictError,
  ApprovalRejectedError,
  type Approvals,
  ConfigurationError,
  DriftError,
  type Idempotency,
  InvalidInputError,
  type ToolPolicy,
} from '@idempotent-tools/core';
import { audienceOf, errorText } from '@idempotent-tools/core/adapter-kit';
import type { Agent } from '@mastra/core/agent';
import type { RequestContext } from '@mastra/core/request-context';

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

/**
 * A call Mastra approved, recorded on the store, bound to its args and pinned to its tool-call
 * id. Returns the model's text when it must not run (rejected first, other arguments than the
 * approved ones), undefined when it may.
 */
export async function pinApproval(
  approvals: Approvals,
  call: { toolName: string; turnId: string | undefined; scope: string | undefined; args: unknown },
  policy: ToolPolicy | undefined,
  toolCallId: string,
): Promise<string | undefined> {
  try {
    const requested = await approvals.requestApproval(call, { policy, ref: toolCallId });
    let approval = requested;
    if (requested.status === 'pending') {
      approval = await approvals
        .approve(requested.key, { by: `mastra:${toolCallId}` })
        .catch(async (error) => {
          if (!ApprovalConflictError.isInstance(error)) throw error;
          return (await approvals.getApproval(requested.key)) ?? requested;
        });
    }
    if (approval.status === 'rejected') throw new ApprovalRejectedError({ approval });
    return undefined;
  } catch (error) {
    if (audienceOf(error) !== 'model') throw error;
    return errorText(error);
  }
}

/** The tool name of the records of calls the model emitted (see `recordEmitted`). */
export const EMITTED_CALL_TOOL = 'idempotent-tools.mastra.emitted-call';
const notEmitted = new Error('not emitted');

/** The record of one emitted call: its tool-call id is its key, its args are fingerprinted. */
const emitted = (toolName: string, toolCallId: string, args: unknown) => ({
  call: { toolName: EMITTED_CALL_TOOL, turnId: 'emitted', args: { toolName, args } },
  // `reject` whatever the executor's default: other arguments are never this call.
  policy: { businessKey: () => [toolName, toolCallId], onDrift: 'reject' as const },
});

/**
 * Record that the model emitted this call (Mastra's `onInputAvailable`, before its approval gate
 * suspends the run), so that an approval can only authorise a call the model asked for, with
 * exactly its arguments. The first arguments stay: a resume of an edited run snapshot announces
 * the edited ones, which are not recorded.
 */
export async function recordEmitted(
  executor: Idempotency,
  toolName: string,
  toolCallId: string,
  args: unknown,
): Promise<void> {
  const { call, policy } = emitted(toolName, toolCallId, args);
  await executor
    .run(call, () => true, policy)
    .catch((error: unknown) => {
      if (!DriftError.isInstance(error)) throw error;
    });
}

/**
 * @throws DriftError when the model asked for this call (`toolCallId`) with other arguments (an
 *   edited run snapshot); InvalidInputError (for the model) when it never asked for it here
 */
export async function checkEmitted(
  executor: Idempotency,
  toolName: string,
  toolCallId: string,
  args: unknown,
): Promise<void> {
  const { call, policy } = emitted(toolName, toolCallId, args);
  try {
    await executor.run(
      call,
      () => {
        throw notEmitted;
      },
      { ...policy, isTerminalError: () => false },
    );
  } catch (error) {
    if (DriftError.isInstance(error)) {
      throw new DriftError({
        key: error.key,
        toolName,
        storedFingerprint: error.storedFingerprint,
        fingerprint: error.fingerprint,
        message: `The approved call of ${toolName} (${toolCallId}) has other arguments than the model asked for: the approval does not authorise them. Nothing ran.`,
      });
    }
    if (error !== notEmitted) throw error;
    throw new InvalidInputError({
      field: 'args',
      message: `The approved call of ${toolName} (${toolCallId}) is not one the model asked for on this server: the approval does not authorise it. Nothing ran. Call ${toolName} to ask for an approval.`,
    });
  }
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

type Resume<M extends keyof AnyAgent> = Parameters<AnyAgent[M]>[0];
type Helper<M extends keyof AnyAgent> = Omit<Resume<M>, 'runId' | 'toolCallId' | 'reason'> &
  ToolCallDecider;

function split<T extends ToolCallDecider>(options: T) {
  const { by: _by, reason, ...rest } = options;
  return { rest, reason };
}

/**
 * `agent.approveToolCall`, with the approval stored first (who approved, bound to the call's
 * args): a call rejected on the store first is refused (`ApprovalConflictError`) and nothing runs.
 */
export async function approveToolCall(agent: AnyAgent, options: Helper<'approveToolCall'>) {
  await recordToolCallDecision(agent, { ...options, decision: 'approved' });
  return agent.approveToolCall(split(options).rest as Resume<'approveToolCall'>);
}

/** `agent.approveToolCallGenerate`, with the approval stored first (see `approveToolCall`). */
export async function approveToolCallGenerate(
  agent: AnyAgent,
  options: Helper<'approveToolCallGenerate'>,
) {
  await recordToolCallDecision(agent, { ...options, decision: 'approved' });
  return agent.approveToolCallGenerate(split(options).rest as Resume<'approveToolCallGenerate'>);
}

/**
 * `agent.declineToolCall`, with the rejection stored first (Mastra never calls `execute` for a
 * declined call): the call stays rejected, an approval of it delivered later runs nothing.
 */
export async function declineToolCall(agent: AnyAgent, options: Helper<'declineToolCall'>) {
  await recordToolCallDecision(agent, { ...options, decision: 'rejected' });
  const { rest, reason } = split(options);
  return agent.declineToolCall({ ...rest, ...(reason === undefined ? {} : { reason }) } as never);
}

/** `agent.declineToolCallGenerate`, with the rejection stored first (see `declineToolCall`). */
export async function declineToolCallGenerate(
  agent: AnyAgent,
  options: Helper<'declineToolCallGenerate'>,
) {
  await recordToolCallDecision(agent, { ...options, decision: 'rejected' });
  const { rest, reason } = split(options);
  return agent.declineToolCallGenerate({
    ...rest,
    ...(reason === undefined ? {} : { reason }),
  } as never);
}
