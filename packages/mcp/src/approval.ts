/**
 * Approvals over MCP elicitation: a tool whose policy has `approval` asks the user, through the
 * client, before it runs; the answer is stored with core's approvals (`createApprovals`), bound
 * to the exact call (scope, turn, tool, args fingerprint):
 * - accept -> approved (by the client's identity): the tool runs once, a retry replays it;
 * - decline -> rejected: stored, the same `approval_rejected` error result on every retry;
 * - cancel (or no answer) -> nothing decided: an `approval_pending` error result, and the next
 *   call asks again.
 * How the question travels: 2025-11-25 and before (1.x, and the 2.x legacy leg) a push-style
 * `elicitation/create` request during the call; 2026-07-28 an `input_required` result the client
 * answers by retrying the call with `inputResponses` (multi round-trip), keyed by the approval
 * key, so an answer given for other arguments never counts.
 */
import {
  ApprovalConflictError,
  type Approvals,
  type Call,
  ConfigurationError,
  closestName,
  type IdempotentResult,
  TOOL_POLICY_FIELDS,
  type ToolFunction,
  type ToolPolicy,
} from '@idempotent-tools/core';
import type { RepeatablePolicy } from '@idempotent-tools/core/adapter-kit';
import type { CallToolResult, McpServerLike, ToolCallInfo, ToolExtra } from './sdk.js';

/** The `approval` of a tool's policy: ask the user through elicitation before it runs. */
export interface McpApprovalPolicy {
  /**
   * What the user is asked. A string gets the call's arguments appended (the approval is for
   * these arguments only); a function of the call returns the whole message.
   * @default "Allow <tool> to run with these arguments?" and the arguments
   */
  message?: string | ((call: ToolCallInfo) => string) | undefined;
  /**
   * Who decides, stored with the decision (and named in a rejection the model reads).
   * @default the MCP client: "mcp-client <OAuth client id or client name> session=<id>"
   */
  by?: ((call: ToolCallInfo) => string | undefined) | undefined;
  /**
   * How long to wait for the user's answer to a push-style elicitation (2025-11-25 and before),
   * in ms; no answer in time is "not decided" (the next call asks again).
   * @default 600000 (10 minutes)
   */
  timeout?: number | undefined;
}

/** `true` (ask with the defaults), or how to ask. */
export type McpApprovalOption = boolean | McpApprovalPolicy;

/** The `inputRequests` key (2026-07-28) of an approval: this prefix and the approval key. */
export const APPROVAL_INPUT_PREFIX = 'io.idempotent-tools/approval:';

const APPROVAL_FIELDS = ['message', 'by', 'timeout'] as const;
const POLICY_FIELDS = [...TOOL_POLICY_FIELDS, 'repeatable', 'approval'];
const DEFAULT_TIMEOUT = 600_000;
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';

/** An `approval` option, checked. */
export interface ToolApproval {
  message(call: ToolCallInfo): string;
  by(call: ToolCallInfo): string;
  timeout: number;
}

const refuse = (option: string, caller: string, why: string) =>
  new ConfigurationError({ option, message: `${caller}: ${option}: ${why}` });

function checkApproval(name: string, given: unknown, caller: string): ToolApproval | undefined {
  const option = `policies.${name}.approval`;
  if (given === undefined || given === false) return undefined;
  const spec = (given === true ? {} : given) as McpApprovalPolicy;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw refuse(option, caller, 'must be true or { message?, by?, timeout? }.');
  }
  for (const field of Object.keys(spec)) {
    if ((APPROVAL_FIELDS as readonly string[]).includes(field)) continue;
    const near = closestName(field, APPROVAL_FIELDS);
    throw refuse(
      `${option}.${field}`,
      caller,
      `unknown option "${field}"${near === undefined ? '' : `; did you mean "${near}"?`}. The fields are ${APPROVAL_FIELDS.join(', ')}.`,
    );
  }
  const { message, by, timeout = DEFAULT_TIMEOUT } = spec;
  if (message !== undefined && typeof message !== 'function') {
    if (typeof message !== 'string' || message.trim() === '') {
      throw refuse(
        `${option}.message`,
        caller,
        'must be a non-empty string or a function of the call.',
      );
    }
  }
  if (by !== undefined && typeof by !== 'function') {
    throw refuse(`${option}.by`, caller, 'must be a function of the call returning who decides.');
  }
  if (!Number.isSafeInteger(timeout) || timeout <= 0) {
    throw refuse(
      `${option}.timeout`,
      caller,
      `must be a whole number of ms, got ${String(timeout)}.`,
    );
  }
  return {
    message: (call) =>
      typeof message === 'function'
        ? message(call)
        : `${message ?? `Allow ${call.toolName} to run with these arguments?`}\n\n${JSON.stringify(call.args, null, 2)}`,
    by: (call) => (by?.(call) || clientIdentity(call)).slice(0, 512),
    timeout,
  };
}

/**
 * Take `approval` out of each tool's policy (core's adapter kit does not know it): the policies
 * left for the kit, and the approvals by tool name. Policy fields are checked here, with
 * `approval` among the names a typo is matched against.
 * @throws ConfigurationError for a misspelt field, a bad approval, an approval on an excluded or
 *   unsafe tool (it would run unapproved)
 */
export function takeApprovals(options: Record<string, unknown>, caller: string) {
  const approvals = new Map<string, ToolApproval>();
  const given = options.policies;
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    return { policies: given, approvals };
  }
  const listed = (field: 'exclude' | 'unsafe') =>
    Array.isArray(options[field]) ? (options[field] as unknown[]) : [];
  const policies: Record<string, unknown> = {};
  for (const [name, policy] of Object.entries(given as Record<string, unknown>)) {
    if (policy === null || typeof policy !== 'object' || !('approval' in policy)) {
      if (policy !== null && typeof policy === 'object') {
        const misspelt = Object.keys(policy).find((field) => !POLICY_FIELDS.includes(field));
        if (misspelt !== undefined && closestName(misspelt, POLICY_FIELDS) === 'approval') {
          throw new ConfigurationError({
            option: `policies.${name}.${misspelt}`,
            message: `${caller}: policies.${name}: unknown option "${misspelt}"; did you mean "approval"?`,
          });
        }
      }
      policies[name] = policy;
      continue;
    }
    const { approval, ...rest } = policy as { approval?: unknown };
    const checked = checkApproval(name, approval, caller);
    if (checked !== undefined) {
      for (const field of ['exclude', 'unsafe'] as const) {
        if (listed(field).includes(name)) {
          throw refuse(
            `policies.${name}.approval`,
            caller,
            `${name} is in ${field}, so it runs without the wrapper and never asks. Take it out of ${field}, or leave out approval.`,
          );
        }
      }
      approvals.set(name, checked);
    }
    policies[name] = rest;
  }
  return { policies, approvals };
}

/** Who answered: the client's OAuth id or name, and its session. */
function clientIdentity(call: ToolCallInfo): string {
  const who = call.authInfo?.clientId ?? call.clientName ?? 'unknown';
  return call.sessionId === undefined
    ? `mcp-client ${who}`
    : `mcp-client ${who} session=${call.sessionId}`;
}

type Capabilities = { elicitation?: { form?: unknown; url?: unknown } } | undefined;
type InnerServer = {
  getClientCapabilities?: () => Capabilities;
  getClientVersion?: () => { name?: string } | undefined;
  elicitInput?: (params: unknown, options?: unknown) => Promise<unknown>;
  oninitialized?: (() => void) | undefined;
};

const innerOf = (server: McpServerLike) => (server as { server?: InnerServer }).server;

/** Whether the client takes form elicitation (`elicitation: {}` is form, the pre-mode rule). */
function takesForm(capabilities: Capabilities): boolean {
  const elicitation = capabilities?.elicitation;
  if (elicitation === null || typeof elicitation !== 'object') return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

const warned = new Set<string>();

/**
 * Warn the developer (a process warning, once per client name) when a client that cannot be
 * asked connects to a server with approval tools: each call of those tools will be refused.
 * Only a 2025-era connection says so at connect time (`initialize`); 2026-07-28 says it per call.
 */
export function watchCapabilities(server: McpServerLike, tools: string[], caller: string) {
  const inner = innerOf(server);
  if (inner === undefined || typeof inner.getClientCapabilities !== 'function') return;
  const previous = inner.oninitialized;
  inner.oninitialized = () => {
    previous?.();
    if (takesForm(inner.getClientCapabilities?.())) return;
    const name = inner.getClientVersion?.()?.name ?? 'unknown';
    if (warned.has(name)) return;
    warned.add(name);
    process.emitWarning(
      `${caller}: the MCP client "${name}" did not declare the elicitation capability, so ${tools.join(', ')} (approval: true) cannot ask the user and every call of them is refused. Use a client that supports form elicitation.`,
      { code: 'IDEMPOTENT_TOOLS_NO_ELICITATION' },
    );
  };
}

/** A tool error result in `errorForModel`'s shape. */
const errorResult = (error: string, message: string, next: string): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify({ error, message, next }) }],
  isError: true,
});

type ElicitAnswer = { action?: unknown; content?: unknown };

export interface ApprovedCall {
  approvals: Approvals;
  approval: ToolApproval;
  server: McpServerLike;
  info: ToolCallInfo;
  extra: ToolExtra;
  call: Call<Record<string, unknown>>;
  policy: McpToolPolicy;
  fn: ToolFunction<Record<string, unknown>, CallToolResult>;
}

/**
 * Run a call of an approval tool: decided already -> core's guarded run (approved: runs once or
 * replays; rejected: `ApprovalRejectedError`); else ask the user and store the answer.
 * @returns the run's result, or a reply to send as it is (an `input_required` round, a refusal)
 * @throws core's approval and idempotency errors (the caller turns them into error results)
 */
export async function runApproved(
  c: ApprovedCall,
): Promise<{ result: IdempotentResult<CallToolResult> } | { reply: CallToolResult }> {
  const { approvals, call, policy, info } = c;
  const run = async () => ({ result: await approvals.run(call, c.fn, policy) });
  const key = approvals.keyOf(call, policy);
  const existing = await approvals.getApproval(key);
  if (existing !== undefined && existing.status !== 'pending') return run();

  const envelope = c.extra.mcpReq?.envelope;
  const modern = envelope?.[PROTOCOL_VERSION] !== undefined;
  const inputKey = `${APPROVAL_INPUT_PREFIX}${key}`;
  // 2026-07-28: the retry carrying the user's answer (only to a question this server asked).
  const responses = (c.extra.mcpReq as { inputResponses?: Record<string, unknown> } | undefined)
    ?.inputResponses;
  const answered = responses?.[inputKey] as ElicitAnswer | undefined;
  if (existing !== undefined && answered !== undefined) return decide(c, key, answered, run);

  const capabilities = modern
    ? (envelope?.[CLIENT_CAPABILITIES] as Capabilities)
    : innerOf(c.server)?.getClientCapabilities?.();
  const elicit = modern ? undefined : pushElicitation(c);
  if (!takesForm(capabilities) || (!modern && elicit === undefined)) {
    throw new ConfigurationError({
      option: 'approval',
      message: `${call.toolName} needs the user's approval before it runs, and this MCP client cannot be asked (it did not declare the elicitation capability on this connection, or a stateless server never saw its capabilities). Nothing ran. Tell the user to approve it from a client that supports elicitation; do not retry from this one.`,
    });
  }
  await approvals.requestApproval(call, { policy });
  const params = {
    message: c.approval.message(info),
    requestedSchema: { type: 'object', properties: {} },
  };
  if (modern) {
    return {
      reply: {
        resultType: 'input_required',
        inputRequests: {
          [inputKey]: { method: 'elicitation/create', params: { mode: 'form', ...params } },
        },
      },
    };
  }
  let answer: ElicitAnswer;
  try {
    answer = (await elicit?.(params)) as ElicitAnswer;
  } catch {
    answer = { action: 'no-answer' }; // timed out, the client went away, or it failed to ask
  }
  return decide(c, key, answer, run);
}

/** The push-style elicitation of this call (1.x `server.elicitInput`, 2.x `ctx.mcpReq.elicitInput`). */
function pushElicitation(c: ApprovedCall) {
  const signal = c.extra.mcpReq?.signal ?? c.extra.signal;
  const options = { timeout: c.approval.timeout, ...(signal === undefined ? {} : { signal }) };
  const modern = (c.extra.mcpReq as { elicitInput?: InnerServer['elicitInput'] } | undefined)
    ?.elicitInput;
  if (typeof modern === 'function') return (params: unknown) => modern(params, options);
  const inner = innerOf(c.server);
  if (typeof inner?.elicitInput !== 'function') return undefined;
  const elicitInput = inner.elicitInput.bind(inner);
  const related = c.extra.requestId === undefined ? {} : { relatedRequestId: c.extra.requestId };
  return (params: unknown) => elicitInput(params, { ...options, ...related });
}

async function decide(
  c: ApprovedCall,
  key: string,
  answer: ElicitAnswer,
  run: () => Promise<{ result: IdempotentResult<CallToolResult> }>,
) {
  const { approvals, call } = c;
  const by = c.approval.by(c.info);
  if (answer?.action === 'accept' || answer?.action === 'decline') {
    try {
      if (answer.action === 'accept') await approvals.approve(key, { by });
      else await approvals.reject(key, { by, reason: 'the user declined it' });
    } catch (error) {
      // Decided the other way first (another client, a concurrent answer): that decision stands.
      if (!ApprovalConflictError.isInstance(error)) throw error;
    }
    return run();
  }
  return {
    reply: errorResult(
      'approval_pending',
      `The user closed the approval request of ${call.toolName} without deciding. Nothing ran and nothing was decided. Ask the user whether to go ahead; to ask for approval again, call ${call.toolName} again with the same arguments later.`,
      'retry-later',
    ),
  };
}

/**
 * The policy of one MCP tool: its outcome is the tool's `CallToolResult`. `repeatable`: the
 * tool's `inputSchema` gets the `repeat` argument (deliberate repeats, see the README).
 */
export type McpToolPolicy = ToolPolicy<Record<string, unknown>, CallToolResult> &
  RepeatablePolicy & {
    /**
     * Ask the user (MCP elicitation) before the tool runs; the answer is stored, bound to the
     * exact call (see the README's "Approvals"). A tool with an approval is wrapped even when it
     * is annotated `readOnlyHint: true`.
     * @default false
     */
    approval?: McpApprovalOption | undefined;
  };
