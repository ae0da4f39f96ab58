/**
 * Approvals over MCP elicitation: a tool whose policy has `approval` asks the user, through the
 * client, before it runs; the answer is stored with core's approvals, bound to the exact call.
 * Accept: approved, the tool runs once; decline: a stored rejection; cancel (or no answer):
 * nothing decided, the next call asks again. 2025-11-25 and before ask with a push-style
 * `elicitation/create` during the call; 2026-07-28 with an `input_required` result the client
 * answers by retrying the call (`inputResponses`, keyed by the approval key).
 */
import { type AskApproval, ConfigurationError, type ToolPolicy } from '@idempotent-tools/core';
import * as kit from '@idempotent-tools/core/adapter-kit';
import {
  type CallToolResult,
  type Capabilities,
  type McpServerLike,
  type Session,
  sessionOf,
  type ToolCallInfo,
  type ToolExtra,
  takesForm,
} from './sdk.js';

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

/**
 * The policy of one MCP tool: its outcome is the tool's `CallToolResult`. `repeatable`: the
 * tool's `inputSchema` gets the `repeat` argument (deliberate repeats, see the README).
 */
export type McpToolPolicy = ToolPolicy<Record<string, unknown>, CallToolResult> &
  kit.RepeatablePolicy & {
    /**
     * Ask the user (MCP elicitation) before the tool runs; the answer is stored, bound to the
     * exact call (see the README's "Approvals"). A tool with an approval is wrapped even when it
     * is annotated `readOnlyHint: true`.
     * @default false
     */
    approval?: McpApprovalOption | undefined;
  };

/** The `inputRequests` key (2026-07-28) of an approval: this prefix and the approval key. */
export const APPROVAL_INPUT_PREFIX = 'io.idempotent-tools/approval:';

/** An `approval` option, checked. */
export interface ToolApproval {
  message(call: ToolCallInfo): string;
  by(call: ToolCallInfo): string;
  timeout: number;
}

const FIELDS = ['message', 'by', 'timeout'];

/** `approval` of a tool's policy, checked when the server is wrapped (`AdapterSpec.policyFields`). */
export const checkApproval: kit.PolicyFieldCheck = (given, { toolName, treatment, caller }) => {
  const option = `policies.${toolName}.approval`;
  const refuse = (field: string, why: string) =>
    new ConfigurationError({
      option: `${option}${field}`,
      message: `${caller}: ${option}${field}: ${why}`,
    });
  if (given === false) return undefined;
  const spec = (given === true ? {} : given) as McpApprovalPolicy;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw refuse('', 'must be true or { message?, by?, timeout? }.');
  }
  const unknown = kit.unknownOption(spec, FIELDS);
  if (unknown !== undefined) {
    throw refuse(`.${unknown.name}`, `${unknown.message}. The fields are ${FIELDS.join(', ')}.`);
  }
  if (treatment !== 'wrap') {
    throw refuse(
      '',
      `${toolName} is in ${treatment}, so it runs without the wrapper and never asks. Take it out of ${treatment}, or leave out approval.`,
    );
  }
  const { message, by, timeout = 600_000 } = spec;
  if (
    typeof message !== 'function' &&
    message !== undefined &&
    (typeof message !== 'string' || message.trim() === '')
  ) {
    throw refuse('.message', 'must be a non-empty string or a function of the call.');
  }
  if (by !== undefined && typeof by !== 'function') {
    throw refuse('.by', 'must be a function of the call returning who decides.');
  }
  if (!Number.isSafeInteger(timeout) || timeout <= 0) {
    throw refuse('.timeout', `must be a whole number of ms, got ${String(timeout)}.`);
  }
  const ask = `Allow ${toolName} to run with these arguments?`;
  return {
    message: (call) =>
      typeof message === 'function'
        ? message(call)
        : `${message ?? ask}\n\n${JSON.stringify(call.args, null, 2)}`,
    by: (call) => {
      const who = `mcp-client ${call.authInfo?.clientId ?? call.clientName ?? 'unknown'}`;
      const client = call.sessionId === undefined ? who : `${who} session=${call.sessionId}`;
      return (by?.(call) || client).slice(0, 512);
    },
    timeout,
  } satisfies ToolApproval;
};

const warned = new Set<string>();

/**
 * A process warning (once per client name) when a client that cannot be asked connects to a
 * server with approval tools. Only a 2025-era connection says so at `initialize`.
 */
export function watchCapabilities(server: McpServerLike, tools: string[], caller: string) {
  const inner = sessionOf(server);
  if (typeof inner?.getClientCapabilities !== 'function') return;
  const previous = inner.oninitialized;
  inner.oninitialized = () => {
    previous?.();
    const name = inner.getClientVersion?.()?.name ?? 'unknown';
    if (takesForm(inner.getClientCapabilities?.()) || warned.has(name)) return;
    warned.add(name);
    process.emitWarning(
      `${caller}: the MCP client "${name}" did not declare the elicitation capability, so ${tools.join(', ')} (approval: true) cannot ask the user and every call of them is refused. Use a client that supports form elicitation.`,
      { code: 'IDEMPOTENT_TOOLS_NO_ELICITATION' },
    );
  };
}

/** The push-style elicitation of a call (2.x `ctx.mcpReq.elicitInput`, 1.x `server.elicitInput`). */
function pushElicitation(server: McpServerLike, extra: ToolExtra, timeout: number) {
  const signal = extra.mcpReq?.signal ?? extra.signal;
  const options = { timeout, ...(signal === undefined ? {} : { signal }) };
  const own = (extra.mcpReq as Session | undefined)?.elicitInput;
  if (typeof own === 'function') return (params: unknown) => own(params, options);
  const elicitInput = sessionOf(server)?.elicitInput?.bind(sessionOf(server));
  const related = extra.requestId === undefined ? {} : { relatedRequestId: extra.requestId };
  return elicitInput && ((params: unknown) => elicitInput(params, { ...options, ...related }));
}

/**
 * How MCP asks the user about one call of an approval tool (undefined for other tools), for
 * core's `runAsking`: the answer the client's retry carries (2026-07-28), else an elicitation.
 * An `input_required` round, or the user closing the question, is the reply (`NotAnOutcome`); a
 * client that cannot be asked is a `ConfigurationError`.
 */
export function askOf(
  approval: ToolApproval | undefined,
  server: McpServerLike,
  info: ToolCallInfo,
): AskApproval | undefined {
  if (approval === undefined) return undefined;
  const { extra, toolName } = info;
  const envelope = extra.mcpReq?.envelope;
  const modern = envelope?.['io.modelcontextprotocol/protocolVersion'] !== undefined;
  const responses = (extra.mcpReq as { inputResponses?: Record<string, unknown> })?.inputResponses;
  const answerOf = (answer: unknown) => {
    const action = (answer as { action?: unknown } | undefined)?.action;
    const by = approval.by(info);
    if (action === 'accept') return { approved: true, by };
    if (action === 'decline') return { approved: false, by, reason: 'the user declined it' };
    const message = `The user closed the approval request of ${toolName} without deciding. Nothing ran and nothing was decided. Ask the user whether to go ahead; to ask for approval again, call ${toolName} again with the same arguments later.`;
    const text = JSON.stringify({ error: 'approval_pending', message, next: 'retry-later' });
    throw new kit.NotAnOutcome({ content: [{ type: 'text', text }], isError: true });
  };
  return async ({ pending, request }) => {
    // 2026-07-28: the retry carrying the user's answer (only to a question this server asked).
    const answered = pending && responses?.[`${APPROVAL_INPUT_PREFIX}${pending.key}`];
    if (answered !== undefined) return answerOf(answered);
    const capabilities = modern
      ? (envelope?.['io.modelcontextprotocol/clientCapabilities'] as Capabilities)
      : sessionOf(server)?.getClientCapabilities?.();
    const elicit = modern ? undefined : pushElicitation(server, extra, approval.timeout);
    if (!takesForm(capabilities) || (!modern && elicit === undefined)) {
      throw new ConfigurationError({
        option: 'approval',
        message: `${toolName} needs the user's approval before it runs, and this MCP client cannot be asked (it did not declare the elicitation capability on this connection, or a stateless server never saw its capabilities). Nothing ran. Tell the user to approve it from a client that supports elicitation; do not retry from this one.`,
      });
    }
    const { key } = await request();
    const params = {
      message: approval.message(info),
      requestedSchema: { type: 'object', properties: {} },
    };
    // No answer (timed out, the client went away, it failed to ask): nothing is decided.
    if (elicit !== undefined) return answerOf(await elicit(params).catch(() => undefined));
    const question = { method: 'elicitation/create', params: { mode: 'form', ...params } };
    const inputRequests = { [`${APPROVAL_INPUT_PREFIX}${key}`]: question };
    throw new kit.NotAnOutcome({ resultType: 'input_required', inputRequests });
  };
}
